// Peak memory and throughput of importFile on large files, one child process per measurement.
//
//   npx ts-node bench/import-memory.ts [--size-mb 1024] [--formats json,ndjson,csv] [--chunk 1000]
//
// It compiles the library to a temp dir, and for each format writes a file of about --size-mb MB
// there (streamed, never held in memory), then runs in a fresh plain-Node child process: first a
// baseline that loads the same modules and only streams + hashes the file, then importFile into a
// new SQLite database. The child reports
// its peak RSS (`process.resourceUsage().maxRSS`) and time; the table shows both, with the import's
// time as a ratio of the baseline's. The SPEC's bound: ≤ 150 MB RSS for a 1 GB file.
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';

type Format = 'json' | 'ndjson' | 'csv';

interface Measurement {
  rows: number;
  ms: number;
  maxRssMb: number;
}

function option(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1] : fallback;
}

/** Writes rows until the file reaches `bytes`, respecting the stream's backpressure. */
export async function generate(path: string, format: Format, bytes: number): Promise<number> {
  const out = createWriteStream(path, { highWaterMark: 1 << 20 });
  let written = 0;
  let rows = 0;
  const write = async (text: string) => {
    written += Buffer.byteLength(text);
    if (!out.write(text)) await once(out, 'drain');
  };
  if (format === 'json') await write('[\n');
  if (format === 'csv') await write('id,value,note\n');
  let piece = '';
  while (written + piece.length < bytes) {
    const id = `row-${rows.toString(36).padStart(8, '0')}`;
    const value = ((rows * 2654435761) % 2_000_000_000) - 1_000_000_000;
    if (format === 'json') piece += `${rows > 0 ? ',\n' : ''}{"id":"${id}","value":${value}}`;
    else if (format === 'ndjson') piece += `{"id":"${id}","value":${value}}\n`;
    else piece += `${id},${value},x\n`;
    rows++;
    if (piece.length > 1 << 16) {
      await write(piece);
      piece = '';
    }
  }
  await write(piece + (format === 'json' ? '\n]\n' : ''));
  out.end();
  await once(out, 'finish');
  return rows;
}

/**
 * The measured process: plain Node on the compiled library (ts-node would add its compiler's
 * ~100 MB to the RSS). Both modes load the same modules, so the baseline includes Node, TypeORM
 * and the driver; the baseline only streams and hashes the file.
 */
const CHILD = `
const [mode, path, format, databasePath, chunk, library] = process.argv.slice(1);
require('reflect-metadata');
const { createHash } = require('node:crypto');
const { createReadStream } = require('node:fs');
const { DataSource } = require('typeorm');
const { checkpointEntities, checkpointMigrations, dataSourceOptionsFromUrl, importFile } = require(library);
(async () => {
  const started = Date.now();
  let rows = 0;
  if (mode === 'baseline') {
    const hash = createHash('sha256');
    for await (const block of createReadStream(path, { highWaterMark: 64 * 1024 })) hash.update(block);
    hash.digest('hex');
  } else {
    const dataSource = new DataSource({ ...dataSourceOptionsFromUrl('sqlite:' + databasePath), entities: checkpointEntities, migrations: checkpointMigrations });
    await dataSource.initialize();
    await dataSource.runMigrations();
    rows = (await importFile(dataSource, 'bench', path, { format, size: Number(chunk) })).rows;
    await dataSource.destroy();
  }
  console.log(JSON.stringify({ rows, ms: Date.now() - started, maxRssMb: process.resourceUsage().maxRSS / 1024 }));
})().catch((error) => { console.error(error); process.exit(1); });
`;

const ROOT = join(__dirname, '..');

function run(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.on('exit', (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`${command} ${args.join(' ')} failed (${code}): ${stdout}`)),
    );
  });
}

async function measure(args: string[], library: string): Promise<Measurement> {
  const stdout = await run(process.execPath, ['-e', CHILD, ...args, library], {
    ...process.env,
    NODE_PATH: join(ROOT, 'node_modules'),
  });
  return JSON.parse(stdout.trim().split('\n').pop() as string) as Measurement;
}

async function main(): Promise<void> {
  const sizeMb = Number(option('size-mb', '1024'));
  const formats = option('formats', 'json,ndjson,csv').split(',') as Format[];
  const chunk = Number(option('chunk', '1000'));
  const dir = mkdtempSync(join(tmpdir(), 'import-bench-'));
  process.stderr.write('compiling the library…\n');
  await run(process.execPath, [
    join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
    '-p',
    'tsconfig.build.json',
    '--outDir',
    join(dir, 'build'),
  ]);
  const library = join(dir, 'build', 'src', 'index.js');
  const table: string[][] = [
    ['format', 'file MB', 'rows', 'baseline s', 'import s', 'time ×baseline', 'rows/s', 'baseline RSS MB', 'peak RSS MB'],
  ];
  try {
    for (const format of formats) {
      const path = join(dir, `source.${format}`);
      process.stderr.write(`writing ${sizeMb} MB of ${format}…\n`);
      const rows = await generate(path, format, sizeMb * 1024 * 1024);
      const fileMb = statSync(path).size / 1024 / 1024;
      process.stderr.write(`importing ${rows} rows…\n`);
      const baseline = await measure(['baseline', path, format, '-', String(chunk)], library);
      const measured = await measure(['import', path, format, join(dir, `${format}.sqlite`), String(chunk)], library);
      if (measured.rows !== rows) throw new Error(`imported ${measured.rows} rows of ${rows}`);
      table.push([
        format,
        fileMb.toFixed(0),
        String(rows),
        (baseline.ms / 1000).toFixed(1),
        (measured.ms / 1000).toFixed(1),
        (measured.ms / Math.max(1, baseline.ms)).toFixed(1),
        Math.round((rows * 1000) / measured.ms).toString(),
        baseline.maxRssMb.toFixed(0),
        measured.maxRssMb.toFixed(0),
      ]);
      rmSync(path, { force: true });
      rmSync(join(dir, `${format}.sqlite`), { force: true });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const widths = table[0].map((_, c) => Math.max(...table.map((row) => row[c].length)));
  for (const row of table) console.log(row.map((cell, c) => cell.padStart(widths[c])).join('  '));
}

// Also a module: bench/import-bench.ts reuses `generate`.
if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}

// `npm run demo`: a resumable, digest-guarded import through the real CLI on the embedded SQLite
// default — started, stopped with Ctrl-C, crashed with SIGKILL, resumed — then checked row by row;
// then a real-looking file (gzipped CSV, typed columns, a few bad rows) imported into a typed table.
// Needs no database server: everything lives in a temporary directory that is removed at the end.
import 'reflect-metadata';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { DataSource } from 'typeorm';
import { checkpointEntities, dataSourceOptionsFromUrl } from '../src';

const ROOT = join(__dirname, '..');
const ROWS = 200_000;
const SIZE = 2_000;
const BATCH = 'demo';

interface Run {
  child: ChildProcess;
  /** Resolves after `n` progress lines (or when the run ends first). */
  afterProgressLines(n: number): Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string }>;
}

/** Starts the CLI (src/cli/main.ts under ts-node) in `cwd`, echoing its progress lines. */
function startCli(cwd: string, args: string[]): Run {
  const child = spawn(
    process.execPath,
    ['-r', require.resolve('ts-node/register/transpile-only'), join(ROOT, 'src', 'cli', 'main.ts'), ...args],
    {
      cwd,
      // The tsconfig is looked up from the working directory; point ts-node at the repo's.
      env: { ...process.env, DATABASE_URL: '', TS_NODE_TRANSPILE_ONLY: 'true', TS_NODE_PROJECT: join(ROOT, 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  let seen = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => {
    console.log(`    │ ${line}`);
    if (/rows\/s/.test(line)) seen++;
    for (const waiter of waiters.filter((w) => seen >= w.n)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string }>((resolve) =>
    child.on('close', (code, signal) => {
      for (const waiter of waiters.splice(0)) waiter.resolve();
      resolve({ code, signal, stdout });
    }),
  );
  return {
    child,
    exited,
    afterProgressLines: (n) => new Promise((resolve) => (seen >= n ? resolve() : waiters.push({ n, resolve }))),
  };
}

async function cli(cwd: string, args: string[]): Promise<string> {
  const { code, stdout } = await startCli(cwd, args).exited;
  if (code !== 0) throw new Error(`typeorm-checkpoint ${args.join(' ')} exited ${code}`);
  return stdout.trimEnd();
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');
}

const PRODUCTS = 20_000;

/** Records mode: a gzipped CSV of typed columns into the application's own table, bad rows set aside. */
async function recordsDemo(cwd: string, db: DataSource): Promise<void> {
  await db.query(`CREATE TABLE products (sku VARCHAR(16) PRIMARY KEY, price DECIMAL(8,2) NOT NULL, in_stock BOOLEAN NOT NULL,
    launched DATE, updated_at DATETIME NOT NULL)`);
  const lines = ['sku,price,in_stock,launched,updated_at'];
  for (let i = 0; i < PRODUCTS; i++) {
    const day = String((i % 28) + 1).padStart(2, '0');
    // Every 5,000th row is broken: a price with three decimals, a 30th of February.
    const price = i % 5000 === 17 ? '9.999' : (((i * 7) % 10000) / 100).toFixed(2);
    const launched = i % 5000 === 42 ? '2024-02-30' : `2024-02-${day}`;
    lines.push(
      `SKU-${i},${price},${i % 3 === 0 ? 'yes' : 'no'},${launched},2025-06-${day}T12:00:00.${String(i % 1000000).padStart(6, '0')}+02:00`,
    );
  }
  writeFileSync(join(cwd, 'products.csv.gz'), gzipSync(`${lines.join('\n')}\n`));
  const args = ['import', 'products.csv.gz', '--batch', 'products', '--into', 'products', '--key', 'sku'];

  console.log(`\n7. Records mode: ${PRODUCTS} products (gzipped CSV) into the application's own typed table "products".`);
  console.log(`   typeorm-checkpoint ${[...args, '--check'].join(' ')}   (validates every row, writes nothing)`);
  console.log(indent(await cli(cwd, [...args, '--check'])));
  console.log(`\n   typeorm-checkpoint ${[...args, '--skip-invalid'].join(' ')}   (bad rows go to checkpoint_import_rejects)`);
  console.log(indent(await cli(cwd, [...args, '--skip-invalid', '--no-progress'])));
  console.log('\n   typeorm-checkpoint rejects products');
  console.log(indent(await cli(cwd, ['rejects', 'products'])));
  const sample = (await db.query(
    "SELECT sku, price, in_stock, launched, updated_at FROM products WHERE sku IN ('SKU-0', 'SKU-1')",
  )) as unknown[];
  console.log('\n   Two rows as stored (timestamps in UTC with their microseconds, booleans as 1/0):');
  for (const row of sample) console.log(`    ${JSON.stringify(row)}`);
}

async function main(): Promise<void> {
  const started = Date.now();
  const cwd = mkdtempSync(join(tmpdir(), 'typeorm-checkpoint-demo-'));
  try {
    console.log(`1. A sample file: ${ROWS} rows of id,value in ${join(cwd, 'sample.csv')}`);
    const lines = ['id,value'];
    for (let i = 0; i < ROWS; i++) lines.push(`row-${String(i).padStart(6, '0')},${(i * 37) % 1000}`);
    writeFileSync(join(cwd, 'sample.csv'), `${lines.join('\n')}\n`);
    const importArgs = ['import', 'sample.csv', '--batch', BATCH, '--size', String(SIZE)];

    console.log(`\n2. typeorm-checkpoint ${importArgs.join(' ')}   (embedded ./checkpoint.sqlite, created on first use)`);
    console.log('   ... and Ctrl-C (SIGINT) after 3 chunks: it stops once the chunk in flight has committed.');
    const first = startCli(cwd, importArgs);
    await first.afterProgressLines(3);
    first.child.kill('SIGINT');
    const stopped = await first.exited;
    console.log(`   exit code ${stopped.code}`);

    console.log('\n3. The same command again: it resumes, and this time the process is killed (SIGKILL) after 5 chunks.');
    const second = startCli(cwd, importArgs);
    await second.afterProgressLines(5);
    second.child.kill('SIGKILL');
    await second.exited;
    console.log('   killed: the chunk in flight was never committed, so it rolls back.');
    console.log(indent(await cli(cwd, ['status', BATCH])));

    console.log('\n4. The same command once more: it resumes at the checkpoint and finishes.');
    console.log(indent(await cli(cwd, [...importArgs, '--no-progress'])));

    console.log('\n5. Final status:');
    console.log(indent(await cli(cwd, ['status', BATCH])));

    // Exactly once: every id present one time with its value, nothing else.
    const db = new DataSource({ ...dataSourceOptionsFromUrl(`sqlite:${join(cwd, 'checkpoint.sqlite')}`), entities: checkpointEntities });
    await db.initialize();
    try {
      const [check] = (await db.query(
        'SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids, SUM(value) AS total FROM checkpoint_import_items WHERE batch = ?',
        [BATCH],
      )) as { n: number; ids: number; total: number }[];
      let expected = 0;
      for (let i = 0; i < ROWS; i++) expected += (i * 37) % 1000;
      const ok = Number(check.n) === ROWS && Number(check.ids) === ROWS && Number(check.total) === expected;
      console.log(
        `\n6. Check: ${check.n} rows, ${check.ids} distinct ids, sum of values ${check.total} (expected ${ROWS}, ${ROWS}, ${expected}): ${ok ? 'every row exactly once' : 'MISMATCH'}`,
      );
      if (!ok) process.exitCode = 1;

      await recordsDemo(cwd, db);
    } finally {
      await db.destroy();
    }
    console.log(`\nDone in ${((Date.now() - started) / 1000).toFixed(1)} s.`);
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});

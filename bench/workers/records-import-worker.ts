// One measured import of the typed CSV (bench/records-import-bench.ts), run on plain Node from the
// swc output so its peak RSS is its own. Prints one JSON line: { rows, ms, maxRssMb }, or
// { unavailable } when importFile refuses records mode (a build without `into`).
//   into <database url> <file> <size>            importFile(…, { into: 'bench_typed', size })
//   resume <database url> <file> <size>          the same, stopped at 90 %; the resume that finishes it is timed
//   check-<variant> <database url> <file> <size>  pass 1 alone (check: true): key (the table's key by default),
//                                                 no-key (key: false), records (no table), create (a new table's types inferred)
//   typeorm <database url> <csv> <size> <limit>  what a TypeORM user writes: repository.insert of `size` entities per transaction
//   sqlite-raw <sqlite file> <csv> <size>        better-sqlite3 prepared INSERT per row, one transaction per `size` rows
import 'reflect-metadata';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { DataSource, EntitySchema } from 'typeorm';
import { CheckpointError, checkpointEntities, checkpointMigrations, dataSourceOptionsFromUrl, importFile } from '../../src';

interface SqliteDatabase {
  pragma(text: string): unknown;
  prepare(sql: string): { run(...parameters: unknown[]): unknown };
  transaction<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void;
  close(): void;
}
const Database = require('better-sqlite3') as new (file: string) => SqliteDatabase;

/** The typed table as a TypeORM application maps it. */
interface BenchTyped {
  id: number;
  price: string;
  name: string;
  createdAt: Date;
  active: boolean;
  day: string;
}

const [mode, target, path, sizeArg, limitArg] = process.argv.slice(2);

const BenchTypedSchema = new EntitySchema<BenchTyped>({
  name: 'BenchTyped',
  tableName: 'bench_typed',
  columns: {
    id: { type: Number, primary: true },
    price: { type: 'numeric', precision: 12, scale: 2 },
    name: { type: 'text' },
    createdAt: { name: 'created_at', type: target.startsWith('sqlite') ? 'datetime' : 'timestamp' },
    active: { type: Boolean },
    day: { type: 'date' },
  },
});
const size = Number(sizeArg);

/** The bench's CSV has no quoting: each line splits at its commas (id,price,name,created_at,active,day). */
async function* lines(limit = Infinity): AsyncGenerator<string[]> {
  let header = true;
  let count = 0;
  for await (const line of createInterface({ input: createReadStream(path, { highWaterMark: 1 << 20 }), crlfDelay: Infinity })) {
    if (header) {
      header = false;
      continue;
    }
    if (line === '') continue;
    if (count++ >= limit) return;
    yield line.split(',');
  }
}

async function openDataSource(entities: EntitySchema[] = []): Promise<DataSource> {
  const dataSource = new DataSource({
    ...dataSourceOptionsFromUrl(target),
    entities: [...checkpointEntities, ...entities],
    migrations: checkpointMigrations,
  });
  await dataSource.initialize();
  return dataSource;
}

async function libraryImport(): Promise<Record<string, unknown>> {
  const dataSource = await openDataSource();
  try {
    const started = performance.now();
    // Records-mode options through a variable: this branch's ImportFileOptions may not name them yet.
    const options: Record<string, unknown> = { into: 'bench_typed', size };
    let outcome;
    try {
      outcome = await importFile(dataSource, 'bench', path, options);
    } catch (error) {
      if (error instanceof CheckpointError && (error.code === 'INVALID_ARGUMENT' || error.code === 'INVALID_INPUT')) {
        return { unavailable: `${error.code}: ${error.message}` };
      }
      throw error;
    }
    const ms = performance.now() - started;
    if (!outcome.done) throw new Error('import did not finish');
    return { rows: outcome.rows, ms };
  } finally {
    await dataSource.destroy();
  }
}

/**
 * A resume of an import stopped (by its signal) once 90 % of the file was committed: the stop is
 * not timed; the resume, which finishes the file, is.
 */
async function resumedImport(): Promise<Record<string, unknown>> {
  const dataSource = await openDataSource();
  try {
    const stop = new AbortController();
    const first = await importFile(dataSource, 'bench', path, {
      into: 'bench_typed',
      size,
      signal: stop.signal,
      onProgress: (progress) => {
        if (progress.total !== null && progress.total !== undefined && progress.items >= progress.total * 0.9) stop.abort();
      },
    });
    // On a quiet host a small file loads whole beside pass 1 (one commit, no 90 % to stop at): the
    // state a stop at 90 % commits is then made from the finished import, by hand (PostgreSQL, the only
    // database that loads beside pass 1).
    let before = first.rows;
    if (first.done) {
      before = Math.floor((first.nextIndex * 0.9) / size) * size;
      await rewindTo(dataSource, before);
    }
    const started = performance.now();
    const outcome = await importFile(dataSource, 'bench', path, { into: 'bench_typed', size });
    const ms = performance.now() - started;
    if (!outcome.done) throw new Error('the resumed import did not finish');
    return { rows: before + outcome.rows, resumedRows: outcome.rows, ms };
  } finally {
    await dataSource.destroy();
  }
}

/**
 * Turns the finished import of `bench` back into the one a stop after row `next` commits: the rows
 * from it on deleted, the checkpoint at it with the byte offset of its line (the CSV's lines are
 * rows, ids from 1) and the counts of the chunks before it.
 */
async function rewindTo(dataSource: DataSource, next: number): Promise<void> {
  let offset = 0;
  let line = -1; // the header
  for await (const text of createInterface({ input: createReadStream(path, { highWaterMark: 1 << 20 }), crlfDelay: Infinity })) {
    if (line === next) break;
    offset += Buffer.byteLength(text) + 1;
    line++;
  }
  await dataSource.transaction(async (tx) => {
    await tx.query('DELETE FROM bench_typed WHERE id > $1', [next]);
    await tx.query("UPDATE checkpoint_imports SET next_index = $1, next_offset = $2, written_rows = $1, chunks = $3 WHERE id = 'bench'", [
      next,
      offset,
      next / size,
    ]);
  });
}

/** Pass 1 alone (`check: true`), with what the variant adds to it; nothing is written. */
function checkOnly(variant: 'key' | 'no-key' | 'records' | 'create'): () => Promise<Record<string, unknown>> {
  const options = {
    key: { into: 'bench_typed' },
    'no-key': { into: 'bench_typed', key: false as const },
    records: { records: true },
    create: { into: 'bench_created', create: true },
  }[variant];
  return async () => {
    const dataSource = await openDataSource();
    try {
      const started = performance.now();
      const outcome = await importFile(dataSource, `check-${variant}`, path, { ...options, check: true, size });
      const ms = performance.now() - started;
      if (outcome.invalid !== 0) throw new Error(`check-${variant}: ${outcome.invalid} invalid rows`);
      return { rows: outcome.rows, ms };
    } finally {
      await dataSource.destroy();
    }
  };
}

async function typeormInsert(): Promise<Record<string, unknown>> {
  const dataSource = await openDataSource([BenchTypedSchema]);
  try {
    const started = performance.now();
    let rows = 0;
    let chunk: BenchTyped[] = [];
    const flush = async () => {
      const entities = chunk;
      chunk = [];
      await dataSource.transaction((manager) => manager.getRepository(BenchTypedSchema).insert(entities));
      rows += entities.length;
    };
    for await (const [id, price, name, createdAt, active, day] of lines(Number(limitArg))) {
      chunk.push({ id: Number(id), price, name, createdAt: new Date(`${createdAt.replace(' ', 'T')}Z`), active: active === 'true', day });
      if (chunk.length === size) await flush();
    }
    if (chunk.length > 0) await flush();
    return { rows, ms: performance.now() - started };
  } finally {
    await dataSource.destroy();
  }
}

/** The hand-written loop: typed values bound to one prepared INSERT, a transaction per `size` rows. */
async function rawSqlite(): Promise<Record<string, unknown>> {
  const started = performance.now();
  const db = new Database(target);
  db.pragma('journal_mode = WAL');
  const insert = db.prepare('INSERT INTO bench_typed (id, price, name, created_at, active, day) VALUES (?, ?, ?, ?, ?, ?)');
  const insertChunk = db.transaction((rows: string[][]) => {
    for (const [id, price, name, createdAt, active, day] of rows)
      insert.run(Number(id), price, name, createdAt, active === 'true' ? 1 : 0, day);
  });
  let rows = 0;
  let chunk: string[][] = [];
  for await (const fields of lines()) {
    chunk.push(fields);
    if (chunk.length === size) {
      insertChunk(chunk);
      rows += chunk.length;
      chunk = [];
    }
  }
  insertChunk(chunk);
  rows += chunk.length;
  db.close();
  return { rows, ms: performance.now() - started };
}

async function main(): Promise<void> {
  const run = {
    into: libraryImport,
    resume: resumedImport,
    typeorm: typeormInsert,
    'sqlite-raw': rawSqlite,
    'check-key': checkOnly('key'),
    'check-no-key': checkOnly('no-key'),
    'check-records': checkOnly('records'),
    'check-create': checkOnly('create'),
  }[mode];
  if (!run) throw new Error(`unknown mode ${mode}`);
  const measured = await run();
  console.log(JSON.stringify({ ...measured, maxRssMb: process.resourceUsage().maxRSS / 1024 }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

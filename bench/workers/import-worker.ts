// One measured import, run on plain Node from the swc output (see compile.ts) so its peak RSS is the
// import's own. Prints one JSON line: { rows, ms, maxRssMb }; `ms` is the import itself (for the
// library: the importFile call, not the DataSource's start-up, which an application has done already).
// The library's line adds where the CPU went (`cpu`): this process until the first commit (pass 1)
// and in all, and the database's backends (on this machine: PostgreSQL's, from /proc).
//   import <database url> <csv> <size>      importFile into checkpoint_import_items
//   sqlite-raw <sqlite file> <csv> <size>   better-sqlite3 prepared INSERT per row, one transaction per `size` rows
import 'reflect-metadata';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { DataSource } from 'typeorm';
import { checkpointEntities, checkpointMigrations, dataSourceOptionsFromUrl, importFile } from '../../src';
import { cpuOf, cpuSpent } from '../process-cpu';

// better-sqlite3 ships no types (and @types/better-sqlite3 is not installed): the calls used here.
interface SqliteDatabase {
  pragma(text: string): unknown;
  prepare(sql: string): { run(...parameters: unknown[]): unknown };
  transaction<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void;
  close(): void;
}
const Database = require('better-sqlite3') as new (file: string) => SqliteDatabase;

const [mode, target, path, sizeArg] = process.argv.slice(2);
const size = Number(sizeArg);

/** CPU ms of the import: this process until its first commit and in all, and the database's backends (null off PostgreSQL). */
export interface ImportCpu {
  firstCommitMs: number;
  /** Rows the first commit made: on PostgreSQL those loaded beside pass 1 (a preload), else one chunk. */
  firstCommitRows: number;
  nodeFirstCommitMs: number;
  nodeMs: number;
  serverMs: number | null;
}

const cpuMs = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1000;

async function libraryImport(): Promise<{ rows: number; ms: number; cpu: ImportCpu }> {
  const dataSource = new DataSource({
    ...dataSourceOptionsFromUrl(target),
    entities: checkpointEntities,
    migrations: checkpointMigrations,
  });
  await dataSource.initialize();
  try {
    // Every client backend of the database, the one this query runs on included (the import's, later).
    const backends = async () =>
      dataSource.options.type === 'postgres'
        ? cpuOf(
            (
              (await dataSource.query(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'",
              )) as { pid: number }[]
            ).map((row) => Number(row.pid)),
          )
        : null;
    const serverBefore = await backends();
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    let firstCommit: { ms: number; cpu: number; rows: number } | null = null;
    // The chunks of the first commit (a preload's) are reported one by one, in one synchronous burst.
    let inFirstBurst = false;
    const onProgress = (progress: { items: number }) => {
      if (firstCommit === null) {
        firstCommit = { ms: performance.now() - started, cpu: cpuMs(process.cpuUsage(cpuBefore)), rows: progress.items };
        inFirstBurst = true;
        setImmediate(() => (inFirstBurst = false));
      } else if (inFirstBurst) {
        firstCommit.rows = progress.items;
      }
    };
    const outcome = await importFile(dataSource, 'bench', path, { format: 'csv', size, onProgress });
    const ms = performance.now() - started;
    const nodeMs = cpuMs(process.cpuUsage(cpuBefore));
    if (!outcome.done || firstCommit === null) throw new Error('import did not finish');
    const serverAfter = serverBefore && (await backends());
    const { ms: firstCommitMs, cpu: nodeFirstCommitMs, rows: firstCommitRows } = firstCommit;
    return {
      rows: outcome.rows,
      ms,
      cpu: { firstCommitMs, firstCommitRows, nodeFirstCommitMs, nodeMs, serverMs: serverBefore && cpuSpent(serverBefore, serverAfter!) },
    };
  } finally {
    await dataSource.destroy();
  }
}

/** The hand-written loop: split each line at its commas (the bench's CSV has no quoting). */
async function rawSqliteImport(): Promise<number> {
  const db = new Database(target);
  db.pragma('journal_mode = WAL');
  const insert = db.prepare('INSERT INTO checkpoint_import_items (batch, id, value) VALUES (?, ?, ?)');
  const insertChunk = db.transaction((rows: [string, number][]) => {
    for (const [id, value] of rows) insert.run('bench', id, value);
  });
  let rows = 0;
  let chunk: [string, number][] = [];
  let header = true;
  for await (const line of createInterface({ input: createReadStream(path, { highWaterMark: 1 << 20 }), crlfDelay: Infinity })) {
    if (header) {
      header = false;
      continue;
    }
    if (line === '') continue;
    const first = line.indexOf(',');
    const second = line.indexOf(',', first + 1);
    chunk.push([line.slice(0, first), Number(line.slice(first + 1, second < 0 ? undefined : second))]);
    if (chunk.length === size) {
      insertChunk(chunk);
      rows += chunk.length;
      chunk = [];
    }
  }
  if (chunk.length > 0) insertChunk(chunk);
  rows += chunk.length;
  db.close();
  return rows;
}

async function timedRaw(): Promise<{ rows: number; ms: number }> {
  const started = performance.now();
  const rows = await rawSqliteImport();
  return { rows, ms: performance.now() - started };
}

async function main(): Promise<void> {
  if (mode !== 'import' && mode !== 'sqlite-raw') throw new Error(`unknown mode ${mode}`);
  const measured = mode === 'import' ? await libraryImport() : await timedRaw();
  console.log(JSON.stringify({ ...measured, maxRssMb: process.resourceUsage().maxRSS / 1024 }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

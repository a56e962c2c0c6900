import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { type DataSource, Table } from 'typeorm';
import {
  CheckpointManager,
  createDashboard,
  type DashboardOptions,
  eachBatch,
  eachPartition,
  importAll,
  importFile,
  listPartitions,
  type PartitionInfo,
  sqlSource,
  step,
} from '../../src';
import { sql } from './database';

/** Names and messages that would run or break the page if they were not escaped. */
export const HOSTILE = {
  // Text outside ASCII too: the pages write it as entities (a page is all ASCII) and show it as it is.
  job: `job <img src=x onerror="window.__pwned=1"> "quoted" 'single' & <script>window.__pwned=2</script> — Ünïcödé ☃ 中`,
  step: `step </td></tr><script>window.__pwned=3</script>`,
  stepValue: { html: '<b>bold</b>', script: '</pre><script>window.__pwned=4</script>' },
  import: `import "><svg onload=window.__pwned=5>`,
  file: `s3://bucket/<script>window.__pwned=6</script>.csv`,
  error: `<img src=x onerror=window.__pwned=7> failed: "bad" row & more — naïve ☃`,
  partitioned: `partitioned <i>job</i> "p" & <script>window.__pwned=8</script>`,
  rangeError: `range <b>broke</b> at row 250: "quoted" & <img src=x onerror=window.__pwned=9>`,
  records: `records <b onmouseover=window.__pwned=10>"prices"</b>`,
  reject: `<script>window.__pwned=11</script>`,
};

/**
 * The records import of the state: 6 source rows in chunks of 2 into a table, `map` skipping one,
 * two invalid rows (one with hostile source text) recorded as rejects.
 */
export const RECORDS = {
  csv: ['code,qty', 'a,1', `${HOSTILE.reject},many`, 'skip-me,2', 'b,3', 'c,x', 'd,4'].join('\n') + '\n',
  size: 2,
  total: 6,
  written: 3,
  skipped: 1,
  invalid: [1, 4],
  chunks: 3,
};

export interface DashboardState {
  deadUrl: string;
  pendingUrl: string;
}

/** Imports `RECORDS.csv` into a new table `dashboard_stock` with invalid rows skipped. */
async function importRecords(db: DataSource): Promise<void> {
  const runner = db.createQueryRunner();
  try {
    await runner.createTable(
      new Table({
        name: 'dashboard_stock',
        columns: [
          { name: 'code', type: 'varchar', length: '40', isPrimary: true },
          { name: 'qty', type: 'integer' },
        ],
      }),
    );
  } finally {
    await runner.release();
  }
  const dir = mkdtempSync(join(tmpdir(), 'dashboard-state-'));
  try {
    const file = join(dir, 'stock.csv');
    writeFileSync(file, RECORDS.csv);
    await importFile(db, HOSTILE.records, file, {
      into: 'dashboard_stock',
      invalid: 'skip',
      size: RECORDS.size,
      map: (record) => (record.code === 'skip-me' ? null : record),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Makes one of everything through the library's API: a done batch job, a step, a lab-shape import,
 * a records import with skipped and invalid rows, a dead letter, a pending file.
 */
export async function makeState(db: DataSource): Promise<DashboardState> {
  await eachBatch(
    db,
    HOSTILE.job,
    (cursor) => ({ items: cursor === null ? [1, 2, 3] : [], next: cursor === null ? 3 : null }),
    10,
    () => undefined,
  );
  await step(db, HOSTILE.step, () => HOSTILE.stepValue);
  await importAll(db, HOSTILE.import, '[{"id":"a","value":1},{"id":"b","value":2}]');
  await importRecords(db);
  const manager = new CheckpointManager(db, { maxRetries: 0 });
  const pendingUrl = 's3://bucket/pending.csv';
  await manager.register([
    { fileUrl: HOSTILE.file, fileType: 'csv', fileTimestamp: new Date(0) },
    { fileUrl: pendingUrl, fileType: 'csv', fileTimestamp: new Date(0) },
  ]);
  if (!(await manager.claimFile(HOSTILE.file, 'csv', new Date(0)))) throw new Error('could not claim the test file');
  await manager.failFile(HOSTILE.file, HOSTILE.error);
  return { deadUrl: HOSTILE.file, pendingUrl };
}

export interface PartitionedState {
  job: string;
  /** The ranges as `listPartitions` reported them once the state was made: one dead, the others done. */
  ranges: PartitionInfo[];
  dead: PartitionInfo;
}

/**
 * A partitioned job through the library's API: `eachPartition` over 400 rows in 4 ranges whose
 * handler throws on row 250 with no retries allowed, so that range is dead and the others finish.
 */
export async function makePartitionedState(db: DataSource): Promise<PartitionedState> {
  await db.query('CREATE TABLE dashboard_rows (id integer PRIMARY KEY, amount integer NOT NULL)');
  const ids = Array.from({ length: 400 }, (_, i) => i + 1);
  await db.query(
    sql(`INSERT INTO dashboard_rows (id, amount) VALUES ${ids.map(() => '(?, ?)').join(', ')}`),
    ids.flatMap((id) => [id, id * 10]),
  );
  const source = await sqlSource(db, 'dashboard_rows', 'id');
  const handler = (items: Record<string, unknown>[]) => {
    if (items.some((row) => Number(row.id) === 250)) throw new Error(HOSTILE.rangeError);
  };
  const options = { partitions: 4, maxRetries: 0 };
  const failed = await eachPartition(db, HOSTILE.partitioned, source, 50, handler, options).then(
    () => null,
    (error: unknown) => error,
  );
  if (!(failed instanceof Error) || failed.message !== HOSTILE.rangeError)
    throw new Error(`expected the handler's error, got ${String(failed)}`);
  const rest = await eachPartition(db, HOSTILE.partitioned, source, 50, handler, { ...options, wait: true });
  if (rest.done) throw new Error('the partitioned job should not be done with a dead range');
  const ranges = await listPartitions(db, HOSTILE.partitioned);
  const dead = ranges.filter((range) => range.status === 'dead');
  if (dead.length !== 1 || ranges.some((range) => range.status !== 'dead' && range.status !== 'done')) {
    throw new Error(`expected one dead range and the others done, got ${JSON.stringify(ranges.map((range) => range.status))}`);
  }
  return { job: HOSTILE.partitioned, ranges, dead: dead[0] };
}

export interface Served {
  url: string;
  close(): Promise<void>;
}

/**
 * For a mocha suite: `listen(listener)` serves on a free port and `start(options)` serves a
 * dashboard over `ds()` (both closed after the suite); `json(url)` fetches an API page, expecting
 * 200 and JSON.
 */
export function useDashboardServers(ds: () => DataSource): {
  listen(listener: RequestListener): Promise<Served>;
  start(options?: DashboardOptions): Promise<string>;
  json<T>(url: string): Promise<T>;
} {
  const servers: Served[] = [];
  after(async () => {
    for (const server of servers) await server.close();
  });
  const listen = async (listener: RequestListener) => {
    const server = await serve(listener);
    servers.push(server);
    return server;
  };
  return {
    listen,
    async start(options = {}) {
      const handler = createDashboard(ds(), options);
      return (await listen((req, res) => void handler(req, res))).url;
    },
    async json<T>(url: string): Promise<T> {
      const response = await fetch(url);
      expect(response.status, url).to.equal(200);
      expect(response.headers.get('content-type')).to.match(/^application\/json/);
      return (await response.json()) as T;
    },
  };
}

/** Serves `listener` on 127.0.0.1 at a free port. */
export async function serve(listener: RequestListener): Promise<Served> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

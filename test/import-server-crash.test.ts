import { expect } from 'chai';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { PRELOAD_MIN_BYTES } from '../src/import/preload';
import { type Child, kill } from './support/child';
import { cli, cliJson, startCli } from './support/cli-run';
import { DRIVER } from './support/database';
import { type PrivateCluster, startPrivateCluster } from './support/private-cluster';

// Both files under PRELOAD_MIN_BYTES as CSV, so every row goes through chunks (a larger file may
// load in one transaction during pass 1, which a crash loses whole: see import-preload.test.ts).
const RECORDS = 60_000;
const ITEMS = 120_000;
const SIZE = 1000;

/**
 * Each import's three crashes, each at a share of the file and past the checkpoint the one before left:
 * - 'running': the server stops wherever the import is (mid-COPY, mid-commit, between chunks);
 * - 'held': the test holds the import between two chunks (its checkpoint row locked), flushes the
 *   WAL, pauses the WAL writer and lets LOST_CHUNKS chunks commit before the crash, which loses
 *   exactly those: commits the import saw acknowledged.
 */
const CRASHES = [
  { share: 0.2, kind: 'running' },
  { share: 0.45, kind: 'held' },
  { share: 0.7, kind: 'held' },
] as const;
const LOST_CHUNKS = 2;
const POLL_MS = 20;
// Generous: a full CI run may share the machine's two cores.
const WAIT_MS = 120_000;

/**
 * An immediate stop throws away what the server holds in memory only; WAL it has written to the
 * kernel survives (the machine does not lose power). So that asynchronous commits stay in memory
 * until the crash, as a power cut would find them, nothing flushes WAL on its own once the WAL
 * writer is paused: the background writer writes no page, no dirty page is evicted, no checkpoint
 * starts. fsync is off: nothing here outlives the OS.
 */
const CLUSTER_SETTINGS = {
  fsync: 'off',
  shared_buffers: `'512MB'`,
  wal_buffers: `'32MB'`,
  bgwriter_lru_maxpages: 0,
  max_wal_size: `'8GB'`,
  checkpoint_timeout: `'1h'`,
  autovacuum: 'off',
  // Not UTC: a zone-less timestamptz is UTC for the import (SPEC) and for the reference \copy (its session's TimeZone).
  timezone: `'America/New_York'`,
};

const TARGET_DDL = `(
  id integer NOT NULL,
  name text NOT NULL,
  amount numeric(12, 2) NOT NULL,
  at timestamptz NOT NULL,
  flag boolean,
  note text
)`;

const BOOLEANS = ['t', 'f', 'true', 'false', '1', '0', 'yes', 'NO', ''];

/** Quotes a CSV field (RFC 4180) when it must be. */
function csvField(text: string): string {
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** Row `i` of the typed CSV: quoting, backslashes, tabs, newlines, NULLs, empty strings, timestamps with and without zones. */
function recordLine(i: number): string {
  const name = i % 13 === 0 ? `Smith, "J" ${i}` : i % 17 === 0 ? `Zoë 東京 ${i}` : `name ${i}`;
  const cents = ((i * 7919) % 2_000_001) - 1_000_000;
  const amount = i % 10 === 0 ? String(Math.trunc(cents / 100)) : (cents / 100).toFixed(2);
  const iso = new Date(Date.UTC(2024, 0, 1) + i * 37_123).toISOString(); // 2024-01-01T00:00:37.123Z
  const micros = String((i * 7) % 1_000_000).padStart(6, '0');
  const date = iso.slice(0, 10);
  const time = iso.slice(11, 19);
  const at = i % 3 === 0 ? `${date}T${time}.${micros}Z` : i % 3 === 1 ? `${date} ${time}.${micros}+05:30` : `${date}T${time}`;
  const flag = BOOLEANS[i % BOOLEANS.length];
  // An empty unquoted field is NULL, a quoted one the empty string: in COPY's CSV format and in the import alike.
  const note = i % 7 === 0 ? '' : i % 11 === 0 ? '""' : csvField(i % 101 === 0 ? `two\nlines, "quoted" C:\\path\\${i}\tend` : `note ${i}`);
  return [i, csvField(name), amount, at, flag, note].join(',');
}

/** `count` records; now and then a line twice (no unique key: a repeat is a row of its own). */
function recordsCsv(count: number): string {
  const lines = ['id,name,amount,at,flag,note'];
  for (let i = 0; lines.length <= count; i++) {
    lines.push(recordLine(i));
    if (i % 997 === 0 && lines.length <= count) lines.push(recordLine(i));
  }
  return `${lines.join('\r\n')}\r\n`;
}

/** The lab's `{ id, value }` rows: `count` unique ids (some quoted in CSV), values across ±2^53. */
function itemRows(count: number): [string, string][] {
  const rows: [string, string][] = [];
  for (let i = 0; i < count; i++) {
    const id = i % 97 === 0 ? `row "ü", ${i}` : `row-${i}`;
    const value = ((BigInt(i) * 2654435761n) % 9007199254740991n) - 4503599627370495n;
    rows.push([id, value.toString()]);
  }
  return rows;
}

async function connect(url: string): Promise<Client> {
  const client = new Client({ connectionString: url });
  client.on('error', () => undefined); // a connection the crash ends: the queries on it report it
  await client.connect();
  return client;
}

async function countOf(client: Client, sql: string, parameters: unknown[] = []): Promise<number> {
  const { rows } = await client.query<{ n: string }>(sql, parameters);
  return Number(rows[0].n);
}

/** The batch's committed checkpoint, -1 before the import created its row. */
async function checkpointOf(client: Client, batch: string): Promise<number> {
  const { rows } = await client.query<{ next_index: string }>('SELECT next_index FROM checkpoint_imports WHERE id = $1', [batch]);
  return rows.length === 0 ? -1 : Number(rows[0].next_index);
}

/**
 * Locks the batch's checkpoint row (`FOR UPDATE`, in a transaction left open) and returns the
 * checkpoint: the import's next chunk waits for the lock, so the import stands still between two
 * chunks until the transaction ends — with a ROLLBACK, or with the server.
 */
async function holdCheckpoint(client: Client, batch: string): Promise<number> {
  await client.query('BEGIN');
  const { rows } = await client.query<{ next_index: string }>('SELECT next_index FROM checkpoint_imports WHERE id = $1 FOR UPDATE', [
    batch,
  ]);
  return Number(rows[0].next_index);
}

/** Polls the batch's checkpoint until it reaches `target`; fails when the import exits first, or after WAIT_MS. */
async function checkpointReaches(client: Client, batch: string, child: Child, target: number): Promise<number> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const next = await checkpointOf(client, batch);
    if (next >= target) return next;
    const { exitCode, signalCode } = child.process;
    if (exitCode !== null || signalCode !== null) {
      return expect.fail(`the import exited (${exitCode ?? signalCode}) at row ${next}, before row ${target}:\n${child.stderr()}`);
    }
    if (Date.now() > deadline) return expect.fail(`the checkpoint did not reach row ${target} within ${WAIT_MS} ms (at ${next})`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** The child's exit; fails (and kills it) when it is still running WAIT_MS after the server's crash. */
async function exitOf(child: Child): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), WAIT_MS)));
  // `exited` is kept from the child's start: it may have exited before this call.
  const outcome = await Promise.race([child.exited, hung]);
  clearTimeout(timer);
  if (outcome === 'hung') {
    await kill(child);
    return expect.fail(`the import did not exit within ${WAIT_MS} ms of the server's crash:\n${child.stderr()}`);
  }
  return { code: outcome.code, stdout: child.lines.join('\n'), stderr: child.stderr() };
}

/** Where a 'held' crash stopped the import: the last checkpoint on disk, and the one the import had committed at the crash. */
interface HeldCrash {
  flushed: number;
  acknowledged: number;
}

/** A 'held' crash (see CRASHES), once the import's checkpoint reaches `target`. */
async function crashAfterLostCommits(cluster: PrivateCluster, child: Child, batch: string, target: number): Promise<HeldCrash> {
  const session = await connect(cluster.url);
  try {
    await checkpointReaches(session, batch, child, target);
    const flushed = await holdCheckpoint(session, batch);
    // Everything committed so far reaches the disk: a crash from now on loses exactly what commits after this.
    await cluster.psql(['-c', 'CHECKPOINT']);
    await cluster.pauseWalWriter();
    await session.query('ROLLBACK');
    await checkpointReaches(session, batch, child, flushed + LOST_CHUNKS * SIZE);
    const acknowledged = await holdCheckpoint(session, batch);
    await cluster.crash();
    return { flushed, acknowledged };
  } finally {
    // Never left running with its WAL writer paused.
    if (cluster.running) await cluster.crash();
    await session.end(); // its connection ended with the server
  }
}

/** A 'running' crash (see CRASHES), once the import's checkpoint reaches `target`. */
async function crashWhileRunning(cluster: PrivateCluster, child: Child, batch: string, target: number): Promise<void> {
  const session = await connect(cluster.url);
  try {
    await checkpointReaches(session, batch, child, target);
  } finally {
    await session.end();
  }
  await cluster.crash();
}

if (DRIVER === 'postgres') {
  describe('imports survive PostgreSQL server crashes (a private cluster, crashed with pg_ctl -m immediate)', function () {
    this.timeout(300_000);
    let cluster: PrivateCluster | undefined;
    let dir: string;

    before(async function () {
      this.timeout(120_000);
      dir = mkdtempSync(join(tmpdir(), 'ck-server-crash-'));
      // No skip: on PostgreSQL a cluster that cannot be built fails the suite.
      cluster = await startPrivateCluster(CLUSTER_SETTINGS);
      const migrate = await cli(['migrate', '--db', cluster.url]);
      expect(migrate.code, migrate.stderr).to.equal(0);
    });

    after(async () => {
      try {
        await cluster?.destroy();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    // A test that failed at a crash leaves the server down: the next one starts it again.
    beforeEach(async () => {
      if (!cluster!.running) await cluster!.start();
    });

    const open = () => connect(cluster!.url);

    /**
     * Runs the CLI import (`args`) into the three CRASHES of the server, then once more to its end,
     * and returns that last run's JSON. After each crash the batch's rows (`rowsOf`) must equal its
     * recovered checkpoint, at a chunk boundary: a chunk's rows and its checkpoint are lost together.
     */
    async function importThroughCrashes(
      args: string[],
      batch: string,
      rows: number,
      rowsOf: (client: Client) => Promise<number>,
    ): Promise<Record<string, unknown>> {
      let recovered = 0;
      for (const { share, kind } of CRASHES) {
        const target = Math.max(Math.floor(rows * share), recovered + 3 * SIZE);
        const child = startCli([...args, '--json']);
        let held: HeldCrash | null = null;
        try {
          if (kind === 'held') held = await crashAfterLostCommits(cluster!, child, batch, target);
          else await crashWhileRunning(cluster!, child, batch, target);
        } catch (error) {
          await kill(child);
          throw error;
        }
        const exit = await exitOf(child);
        expect(exit.code, `the import went on through the crash:\n${exit.stderr}`).to.equal(1);
        expect(JSON.parse(exit.stdout), exit.stderr).to.include({ ok: false, code: 'DATABASE_ERROR' });
        await cluster!.start();
        const check = await open();
        try {
          recovered = await checkpointOf(check, batch);
          const where = `the ${kind} crash past row ${target} (${JSON.stringify(held ?? {})}), recovered at ${recovered}`;
          // The chunks committed after the flush, acknowledged but not on disk, are gone; none before them.
          if (held) expect(recovered, `${where}: not the flushed checkpoint (asynchronous commits?)`).to.equal(held.flushed);
          expect(recovered % SIZE, where).to.equal(0);
          expect(await rowsOf(check), `rows of batch ${batch} after ${where}`).to.equal(recovered);
        } finally {
          await check.end();
        }
      }
      const run = await cliJson(args);
      expect(run.code, run.stderr).to.equal(0);
      // The batch's counts went back with its checkpoint: every chunk counted once over all the runs.
      const check = await open();
      try {
        const { rows: counts } = await check.query<{ written_rows: string; chunks: string }>(
          'SELECT written_rows, chunks FROM checkpoint_imports WHERE id = $1',
          [batch],
        );
        expect(counts.map((c) => [Number(c.written_rows), Number(c.chunks)])).to.deep.equal([[rows, rows / SIZE]]);
      } finally {
        await check.end();
      }
      return run.json;
    }

    it('records mode: a typed CSV into a table without a unique key equals a psql \\copy of the same file, no row lost or doubled', async () => {
      const file = join(dir, 'records.csv');
      writeFileSync(file, recordsCsv(RECORDS));
      expect(statSync(file).size).to.be.below(PRELOAD_MIN_BYTES);
      const setup = await open();
      try {
        await setup.query(`CREATE TABLE crash_records ${TARGET_DDL}`);
        await setup.query(`CREATE TABLE copied_records ${TARGET_DDL}`);
      } finally {
        await setup.end();
      }
      await cluster!.psql(['-c', `SET TimeZone = 'UTC'`, '-c', `\\copy copied_records FROM '${file}' WITH (FORMAT csv, HEADER true)`]);

      const args = ['import', file, '--batch', 'records', '--into', 'crash_records', '--size', String(SIZE), '--db', cluster!.url];
      const countRows = (client: Client) => countOf(client, 'SELECT COUNT(*) AS n FROM crash_records');
      const result = await importThroughCrashes(args, 'records', RECORDS, countRows);
      expect(result).to.include({ ok: true, done: true, nextIndex: RECORDS, skipped: 0, invalid: 0 });

      const check = await open();
      try {
        expect(await countRows(check)).to.equal(RECORDS);
        expect(await countOf(check, 'SELECT COUNT(*) AS n FROM copied_records')).to.equal(RECORDS);
        // The multiset difference both ways, on each row's text (so 1.5 and 1.50 would differ too).
        const { rows: differences } = await check.query<{ side: string; row: string }>(`
          (SELECT 'only imported' AS side, r::text AS row FROM crash_records r
            EXCEPT ALL SELECT 'only imported', c::text FROM copied_records c)
          UNION ALL
          (SELECT 'only copied', c::text FROM copied_records c
            EXCEPT ALL SELECT 'only copied', r::text FROM crash_records r)
          LIMIT 20`);
        expect(differences, 'rows that differ between the import and psql \\copy').to.deep.equal([]);
      } finally {
        await check.end();
      }
    });

    it('the { id, value } rows: a CSV file ends in checkpoint_import_items with every id once and its value', async () => {
      const file = join(dir, 'items.csv');
      const items = itemRows(ITEMS);
      writeFileSync(file, `id,value\r\n${items.map(([id, value]) => `${csvField(id)},${value}`).join('\r\n')}\r\n`);
      expect(statSync(file).size).to.be.below(PRELOAD_MIN_BYTES);

      const args = ['import', file, '--batch', 'items', '--size', String(SIZE), '--db', cluster!.url];
      const countItems = (client: Client) =>
        countOf(client, 'SELECT COUNT(*) AS n FROM checkpoint_import_items WHERE batch = $1', ['items']);
      const result = await importThroughCrashes(args, 'items', ITEMS, countItems);
      expect(result).to.include({ ok: true, done: true, nextIndex: ITEMS });

      const check = await open();
      try {
        const { rows } = await check.query<{ id: string; value: string }>(
          'SELECT id, value::text AS value FROM checkpoint_import_items WHERE batch = $1',
          ['items'],
        );
        const expected = new Map(items);
        const seen = new Set<string>();
        const wrong: string[] = [];
        for (const { id, value } of rows) {
          if (!expected.has(id)) wrong.push(`unexpected id ${id}`);
          else if (seen.has(id)) wrong.push(`id ${id} twice`);
          else if (expected.get(id) !== value) wrong.push(`id ${id}: ${value}, not ${expected.get(id)}`);
          seen.add(id);
        }
        for (const [id] of items) if (!seen.has(id)) wrong.push(`id ${id} missing`);
        expect(wrong.slice(0, 20), `${wrong.length} wrong rows`).to.deep.equal([]);
        expect(rows).to.have.length(ITEMS);
      } finally {
        await check.end();
      }
    });
  });
}

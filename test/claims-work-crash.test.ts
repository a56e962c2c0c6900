import { expect } from 'chai';
import type { DataSource } from 'typeorm';
import { CheckpointManager } from '../src';
import { type Child, kill, startChild } from './support/child';
import { count, createTestDatabase, DRIVER, sql, type TestDatabase } from './support/database';
import { failsAttempt } from './fixtures/work-failures';

const WORKER = 'test/fixtures/claims-work-worker.ts';
// PostgreSQL gets the full fleet; MariaDB fewer files; SQLite (one writer at a time) two processes.
const PROCESSES = { postgres: 8, mysql: 4, sqlite: 2 }[DRIVER];
const CONCURRENCY = DRIVER === 'sqlite' ? 2 : 4;
// SQLite in process is quick (600 files once settled before the first kill point was polled).
const FILES = { postgres: 5000, mysql: 1000, sqlite: 4000 }[DRIVER];
const LEASE_MS = 1500;
const MAX_RETRIES = 3;
const KILLS = 3;

interface Row {
  file_url: string;
  status: string;
  retry_count: number | string;
  error_message: string | null;
  claim_token: number | string;
}

describe(`manager.work() across worker processes with SIGKILLs (${DRIVER})`, function () {
  let database: TestDatabase;
  let ds: DataSource;

  before(async () => {
    database = await createTestDatabase('claims_work_crash');
    ds = await database.open();
    await ds.query('CREATE TABLE work_rows (file_url varchar(255) NOT NULL, worker varchar(64) NOT NULL)');
  });
  after(() => database.drop());

  it(`${PROCESSES} processes × concurrency ${CONCURRENCY}, ${FILES} files, random failures, ${KILLS} SIGKILLs: each file's row exactly once, dead letters exactly the files that failed every attempt`, async () => {
    const parent = new CheckpointManager(ds, { maxRetries: MAX_RETRIES });
    const files = Array.from({ length: FILES }, (_, i) => ({
      fileUrl: `s3://bucket/work/${String(i).padStart(5, '0')}.csv`,
      fileType: 'work',
      fileTimestamp: new Date(1_700_000_000_000 + i),
    }));
    let started = 0;
    const ids = new Map<Child, string>();
    const launch = () => {
      const id = `w${started++}`;
      const child = startChild(WORKER, [database.url, id, String(CONCURRENCY), String(LEASE_MS), String(MAX_RETRIES)]);
      ids.set(child, id);
      return child;
    };
    const children: Child[] = Array.from({ length: PROCESSES }, launch);
    const all = [...children];
    const settled = async () => {
      const summary = await parent.summary();
      return { summary, finished: summary.completed + summary.deadLetters };
    };
    // The files each killed worker held when it died, with their claim tokens then and its id.
    const held = new Map<string, { token: number; worker: string }>();
    const kills: string[] = [];
    const claimsOf = async (worker: string) =>
      (await ds.query(sql("SELECT file_url, claim_token FROM file_checkpoints WHERE status = 'processing' AND processed_by = ?"), [
        worker,
      ])) as {
        file_url: string;
        claim_token: number | string;
      }[];
    try {
      await Promise.all(children.map((child) => child.waitForLine((line) => line === 'ready')));
      // The queue fills only once every worker is up: the first one started would otherwise take
      // the whole queue before the others, and the first kill point, were ready.
      // The files failing every attempt go first (claims take the oldest first; files registered
      // together come in no particular order), so some use their attempts up before the first kill:
      // registered first and made older before the others are there to be claimed.
      const failsEvery = (fileUrl: string) => Array.from({ length: MAX_RETRIES + 1 }, (_, r) => failsAttempt(fileUrl, r)).every(Boolean);
      const alwaysFailing = files.filter((file) => failsEvery(file.fileUrl));
      expect(await parent.register(alwaysFailing)).to.equal(alwaysFailing.length);
      await ds.query(
        sql(`UPDATE file_checkpoints SET created_at = created_at - 1 WHERE file_url IN (${alwaysFailing.map(() => '?').join(', ')})`),
        alwaysFailing.map((file) => file.fileUrl),
      );
      expect(await parent.register(files.filter((file) => !failsEvery(file.fileUrl)))).to.equal(FILES - alwaysFailing.length);
      // Kill points: a worker holding claims dies each time another quarter of the files has
      // settled; a fresh process replaces it, and the killed one's claims come back when their
      // leases expire.
      for (let k = 1; k <= KILLS; k++) {
        for (;;) {
          if ((await settled()).finished >= (FILES * k) / (KILLS + 1)) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        // The victim is a live process that holds claims now (asked of the database, not guessed
        // from its output); when the queue ran out meanwhile, the first process.
        let busy = 0;
        for (;;) {
          const holders = (await ds.query(
            sql(
              "SELECT processed_by AS worker, COUNT(*) AS n FROM file_checkpoints WHERE status = 'processing' GROUP BY processed_by ORDER BY COUNT(*) DESC",
            ),
          )) as { worker: string; n: number | string }[];
          const live = holders.map((row) => children.findIndex((child) => ids.get(child) === row.worker)).find((c) => c >= 0);
          if (live !== undefined) {
            busy = live;
            break;
          }
          if ((await settled()).finished === FILES) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        const victim = children.splice(busy, 1)[0];
        await kill(victim);
        expect(victim.process.signalCode).to.equal('SIGKILL');
        // Dead now: what it still holds stays as it is until a lease expiry hands it to another worker.
        const victimId = ids.get(victim)!;
        const before = held.size;
        for (const row of await claimsOf(victimId)) held.set(row.file_url, { token: Number(row.claim_token), worker: victimId });
        kills.push(`kill ${k}: ${victimId} held ${held.size - before} (settled ${(await settled()).finished})`);
        const replacement = launch();
        children.push(replacement);
        all.push(replacement);
        // Not waited for: the next kill point comes while it starts (MariaDB and SQLite could
        // otherwise settle every file during a start-up).
      }
      await Promise.all(children.map((child) => child.waitForLine((line) => line === 'ready')));
      for (;;) {
        const { summary, finished } = await settled();
        if (finished === FILES) {
          expect(summary).to.include({ pending: 0, processing: 0, failed: summary.deadLetters });
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      for (const child of children) child.process.kill('SIGTERM');
      const results = await Promise.all(children.map((child) => child.waitForLine((line) => line.startsWith('result '))));
      for (const line of results)
        expect(JSON.parse(line.slice('result '.length))).to.have.keys('processed', 'failed', 'cancelled', 'claimLost', 'elapsedMs');
      for (const child of children) expect((await child.exited).code).to.equal(0);
    } finally {
      for (const child of all) await kill(child);
    }

    // Every file's row exactly once when completed, never for a dead letter.
    const written = new Map<string, number>();
    for (const { file_url: url, n } of (await ds.query('SELECT file_url, COUNT(*) AS n FROM work_rows GROUP BY file_url')) as {
      file_url: string;
      n: string;
    }[]) {
      written.set(url, Number(n));
    }
    const rows = (await ds.query('SELECT file_url, status, retry_count, error_message, claim_token FROM file_checkpoints')) as Row[];
    expect(rows).to.have.length(FILES);
    let deadLetters = 0;
    let takenOver = 0;
    for (const row of rows) {
      const attempt = Number(row.retry_count);
      if (row.status === 'completed') {
        expect(written.get(row.file_url), row.file_url).to.equal(1);
        // The last attempt succeeded: the handler did not fail it.
        expect(failsAttempt(row.file_url, attempt), row.file_url).to.equal(false);
      } else {
        expect(row.status).to.equal('failed');
        expect(written.has(row.file_url), row.file_url).to.equal(false);
        // A dead letter used every attempt, the last one failed by the handler or lost with a killed worker.
        expect(attempt).to.equal(MAX_RETRIES);
        if (row.error_message === 'lease expired') takenOver += 1;
        else expect(failsAttempt(row.file_url, attempt), row.file_url).to.equal(true);
        deadLetters += 1;
      }
      // A file whose every attempt fails is a dead letter.
      const alwaysFails = Array.from({ length: MAX_RETRIES + 1 }, (_, r) => failsAttempt(row.file_url, r)).every(Boolean);
      if (alwaysFails) expect(row.status, row.file_url).to.equal('failed');
    }
    expect(written.size).to.equal(FILES - deadLetters);
    expect(await count(ds, 'SELECT COUNT(*) FROM work_rows')).to.equal(FILES - deadLetters);
    expect(deadLetters - takenOver).to.be.greaterThan(0);
    // The killed workers' claims were taken over: every file a dead worker held was claimed again
    // (its token moved on) and settled — unless the killed worker's own completion was already on
    // its way to the server (a commit or failure sent just before the kill still lands), in which
    // case that worker's row is the file's one row (or, failed, it has none). At least one kill found claims to take over.
    expect(held.size, kills.join('; ')).to.be.greaterThan(0);
    const byUrl = new Map(rows.map((row) => [row.file_url, row]));
    const writers = new Map<string, string>();
    for (const { file_url: url, worker } of (await ds.query('SELECT file_url, worker FROM work_rows')) as {
      file_url: string;
      worker: string;
    }[]) {
      writers.set(url, worker);
    }
    let reclaimed = 0;
    for (const [url, { token, worker }] of held) {
      const row = byUrl.get(url)!;
      expect(['completed', 'failed'], url).to.include(row.status);
      if (Number(row.claim_token) > token) {
        reclaimed += 1;
      } else {
        expect(Number(row.claim_token), url).to.equal(token);
        const settledByVictim =
          row.status === 'completed' ? { status: 'completed', writer: worker } : { status: 'failed', writer: undefined };
        expect({ status: row.status, writer: writers.get(url) }, url).to.deep.equal(settledByVictim);
      }
    }
    expect(reclaimed).to.be.greaterThan(0);
  });
});

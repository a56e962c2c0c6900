import { appendFileSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { asPostgres, execFileAsync, freePorts, PG_BIN, postgresIds } from './postgres-binaries';

// Apart from the machine's cluster (5432), the CI leg's PostgreSQL 18 (5450) and replica.ts's range (5460–5490).
const PORTS = { first: 5500, last: 5549 };
// A port taken between the check and the server's bind (another suite's cluster): tried again on another one.
const START_ATTEMPTS = 5;

/** A PostgreSQL server private to one suite, in a folder of its own, that the suite may crash and restart. */
export interface PrivateCluster {
  /** URL of its `postgres` database (trust authentication, 127.0.0.1). */
  readonly url: string;
  /** False once `crash()` stopped it, until `start()`. */
  readonly running: boolean;
  /**
   * Stops the WAL writer (SIGSTOP): from now on, WAL of asynchronous commits stays in the server's
   * shared memory — neither written nor flushed — until `crash()` throws it away.
   */
  pauseWalWriter(): Promise<void>;
  /**
   * Crashes the server with `pg_ctl -m immediate stop` (a paused WAL writer killed first): every
   * server process quits at once, nothing more is written, and the next start runs crash recovery.
   */
  crash(): Promise<void>;
  /** Starts the server (after a crash: crash recovery first) and waits until it accepts connections. */
  start(): Promise<void>;
  /** Runs `psql` (as this process's user, so `\copy` reads the suite's files) with the given arguments. */
  psql(args: string[]): Promise<string>;
  /** Stops the server at once (`-m immediate`) when it runs, and removes the folder. */
  destroy(): Promise<void>;
}

/** SIGKILL for a process this module stopped; one that is gone already is fine. */
function killPaused(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** One statement on a connection of its own, closed before returning. */
async function queryOnce<T>(url: string, sql: string): Promise<T[]> {
  const client = new Client({ connectionString: url });
  client.on('error', () => undefined); // reported by the query that fails
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

/**
 * Builds a cluster with `initdb` (as SPEC's implementation notes describe) on a free port, with
 * `settings` appended to its `postgresql.conf`, and starts it. Throws (after cleaning up) when any
 * step fails.
 */
export async function startPrivateCluster(settings: Record<string, string | number> = {}): Promise<PrivateCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'ck-cluster-'));
  const data = join(dir, 'data');
  const log = join(dir, 'server.log');
  let port = 0;
  let running = false;
  let walWriter: number | null = null;
  const url = () => `postgres://postgres@127.0.0.1:${port}/postgres`;

  const stopImmediately = async () => {
    // A stopped process ignores the postmaster's quit signal until it is continued: killed instead.
    if (walWriter !== null) killPaused(walWriter);
    walWriter = null;
    await asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
    running = false;
  };
  const start = async () => {
    await asPostgres('pg_ctl', ['-D', data, '-l', log, '-w', '-t', '120', 'start']);
    running = true;
  };
  const destroy = async () => {
    try {
      if (running) await stopImmediately();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  try {
    const { uid, gid } = await postgresIds();
    chownSync(dir, uid, gid);
    await asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    const conf = Object.entries({ listen_addresses: `'127.0.0.1'`, unix_socket_directories: `'${dir}'`, ...settings });
    appendFileSync(join(data, 'postgresql.conf'), `\n${conf.map(([name, value]) => `${name} = ${value}`).join('\n')}\n`);
    for (let attempt = 1; !running; attempt++) {
      port = (await freePorts(PORTS, 1))[0];
      // The last setting of a name wins: a later attempt's port replaces the earlier one's.
      appendFileSync(join(data, 'postgresql.conf'), `port = ${port}\n`);
      rmSync(log, { force: true }); // this attempt's log only
      try {
        await start();
      } catch (error) {
        const taken = existsSync(log) && /could not bind|already in use/i.test(readFileSync(log, 'utf8'));
        if (!taken || attempt >= START_ATTEMPTS) throw error;
      }
    }
  } catch (error) {
    // The build's failure is the news; a failed cleanup after it is reported alongside, not instead.
    await destroy().catch((cleanup: unknown) => {
      throw new AggregateError([error, cleanup], 'building the cluster failed, and so did stopping what had started');
    });
    throw error;
  }

  return {
    get url() {
      return url();
    },
    get running() {
      return running;
    },
    async pauseWalWriter() {
      const [row] = await queryOnce<{ pid: number }>(url(), `SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'`);
      if (!row) throw new Error('the cluster has no WAL writer process');
      process.kill(row.pid, 'SIGSTOP');
      walWriter = row.pid;
    },
    crash: stopImmediately,
    start,
    async psql(args) {
      try {
        return (await execFileAsync(join(PG_BIN, 'psql'), ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', url(), ...args])).stdout;
      } catch (error) {
        const { stderr } = error as { stderr?: string };
        throw new Error(`psql ${args.join(' ')} failed: ${stderr || String(error)}`, { cause: error });
      }
    },
    destroy,
  };
}

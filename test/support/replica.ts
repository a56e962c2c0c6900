import { execFile } from 'node:child_process';
import { appendFileSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
// Away from the machine's cluster (5432) and the CI leg's PostgreSQL 18 (5450).
const PORTS = { first: 5460, last: 5490 };

/** A primary and its streaming standby, both private to one suite, in a folder of their own. */
export interface StreamingReplica {
  /** URL of the primary's `postgres` database (trust authentication, 127.0.0.1). */
  primaryUrl: string;
  /** URL of the standby's `postgres` database: read-only, replaying 2 s behind. */
  standbyUrl: string;
  /** Stops both servers at once (`-m immediate`) and removes the folder. */
  destroy(): Promise<void>;
}

/** Runs a PostgreSQL binary as the `postgres` user: the servers refuse to run as root. */
async function asPostgres(binary: string, args: string[]): Promise<void> {
  try {
    await run('runuser', ['-u', 'postgres', '--', join(BIN, binary), ...args]);
  } catch (error) {
    const { stderr, stdout } = error as { stderr?: string; stdout?: string };
    throw new Error(`${binary} ${args.join(' ')} failed: ${stderr || stdout || String(error)}`, { cause: error });
  }
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Two free ports of the range, tried from a random place so that concurrent runs rarely pick the same. */
async function freePorts(count: number): Promise<number[]> {
  const size = PORTS.last - PORTS.first + 1;
  const start = Math.floor(Math.random() * size);
  const found: number[] = [];
  for (let i = 0; i < size && found.length < count; i++) {
    const port = PORTS.first + ((start + i) % size);
    if (await portIsFree(port)) found.push(port);
  }
  if (found.length < count) throw new Error(`no ${count} free ports in ${PORTS.first}–${PORTS.last}`);
  return found;
}

async function postgresIds(): Promise<{ uid: number; gid: number }> {
  const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

/**
 * Builds a real streaming replica as SPEC's implementation notes describe: `initdb` a primary on a
 * free port, allow replication from 127.0.0.1, `pg_basebackup -R` a standby that applies WAL
 * `recovery_min_apply_delay = 2s` late, start both. Throws (after cleaning up) when any step fails.
 */
export async function startStreamingReplica(): Promise<StreamingReplica> {
  const dir = mkdtempSync(join(tmpdir(), 'ck-replica-'));
  const { uid, gid } = await postgresIds();
  chownSync(dir, uid, gid);
  const primary = join(dir, 'p');
  const standby = join(dir, 's');
  const started: string[] = [];
  const destroy = async () => {
    // Both stops are tried even when one fails; the folder goes either way.
    const stops = await Promise.allSettled(started.map((data) => asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])));
    started.length = 0;
    rmSync(dir, { recursive: true, force: true });
    const failed = stops.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
  };
  const [primaryPort, standbyPort] = await freePorts(2);
  try {
    await asPostgres('initdb', ['-D', primary, '-A', 'trust', '-U', 'postgres']);
    appendFileSync(
      join(primary, 'postgresql.conf'),
      `\nport = ${primaryPort}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${dir}'\n`,
    );
    appendFileSync(join(primary, 'pg_hba.conf'), '\nhost replication all 127.0.0.1/32 trust\n');
    // -l: the server's output goes to a file, not to the pipe run() waits on.
    await asPostgres('pg_ctl', ['-D', primary, '-l', join(dir, 'p.log'), '-w', 'start']);
    started.push(primary);
    await asPostgres('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      standby,
      '-R',
      '-X',
      'stream',
    ]);
    appendFileSync(join(standby, 'postgresql.auto.conf'), `\nport = ${standbyPort}\nrecovery_min_apply_delay = '2s'\n`);
    await asPostgres('pg_ctl', ['-D', standby, '-l', join(dir, 's.log'), '-w', 'start']);
    started.push(standby);
  } catch (error) {
    // The build's failure is the news; a failed cleanup after it is reported alongside, not instead.
    await destroy().catch((cleanup: unknown) => {
      throw new AggregateError([error, cleanup], 'building the replica failed, and so did stopping what had started');
    });
    throw error;
  }
  return {
    primaryUrl: `postgres://postgres@127.0.0.1:${primaryPort}/postgres`,
    standbyUrl: `postgres://postgres@127.0.0.1:${standbyPort}/postgres`,
    destroy,
  };
}

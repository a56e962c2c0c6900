import { appendFileSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { asPostgres, freePorts, postgresIds } from './postgres-binaries';

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
  const [primaryPort, standbyPort] = await freePorts(PORTS, 2);
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

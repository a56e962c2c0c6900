import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** Debian's PostgreSQL 15 binaries, whatever POSTGRES_URL points at: the servers the suites build themselves. */
export const PG_BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';

export const execFileAsync = promisify(execFile);

/** Runs a PostgreSQL binary as the `postgres` user (servers refuse to run as root); its stdout. */
export async function asPostgres(binary: string, args: string[]): Promise<string> {
  try {
    return (await execFileAsync('runuser', ['-u', 'postgres', '--', join(PG_BIN, binary), ...args])).stdout;
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

/** `count` free ports of the range, tried from a random place so that concurrent runs rarely pick the same. */
export async function freePorts(range: { first: number; last: number }, count: number): Promise<number[]> {
  const size = range.last - range.first + 1;
  const start = Math.floor(Math.random() * size);
  const found: number[] = [];
  for (let i = 0; i < size && found.length < count; i++) {
    const port = range.first + ((start + i) % size);
    if (await portIsFree(port)) found.push(port);
  }
  if (found.length < count) throw new Error(`no ${count} free ports in ${range.first}–${range.last}`);
  return found;
}

/** The `postgres` user's ids, to hand it the folders its servers write. */
export async function postgresIds(): Promise<{ uid: number; gid: number }> {
  const uid = Number((await execFileAsync('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await execFileAsync('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

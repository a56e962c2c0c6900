// SQLite has one writer at a time and its lock is not fair: a loop of the library's transactions
// that commits and begins again at once can starve another process's waiting writer. An operator's
// write (pause, resume, cancel; files pause, resume, cancel) therefore "knocks" first: it leaves a
// file of its own in a folder named after the database while it runs. Between two batches a loop
// looks for knocks (a stat of the folder, and a directory read once it exists; at most every few
// milliseconds) and, when there is one, leaves the lock free until the knock is gone or a second has
// passed. A loop nobody knocks on never waits.
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource } from 'typeorm';
import { sqliteFileOf } from './sqlite-file';

/** How long a loop waits for a knock to go at most: a waiting writer's busy handler retries every 100 ms at the longest. */
const YIELD_AT_MOST_MS = 1000;
/** How often a yielding loop looks again. */
const LOOK_EVERY_MS = 2;
/**
 * How long a look that found no knock holds: loops whose batches take a millisecond look a few
 * times as often as a knocking writer's busy handler retries, not once a batch (a stat is ~1 % of such a batch).
 */
const NO_KNOCK_HOLDS_MS = 5;

const folders = new WeakMap<DataSource, string | null>();

/** The knock folder of the DataSource's database file (null for an in-memory database: one connection, no other process). */
function folderOf(ds: DataSource): string | null {
  let folder = folders.get(ds);
  if (folder !== undefined) return folder;
  const file = sqliteFileOf(ds);
  folder =
    file === null ? null : join(tmpdir(), `typeorm-checkpoint-knocks-${createHash('sha256').update(file).digest('hex').slice(0, 24)}`);
  folders.set(ds, folder);
  return folder;
}

/** Runs an operator's write with a knock left for the database's running loops, removed when it ends. */
export async function knocking<T>(ds: DataSource, write: () => Promise<T>): Promise<T> {
  const folder = folderOf(ds);
  if (folder === null) return write();
  const knock = join(folder, `${process.pid}-${randomUUID()}`);
  try {
    mkdirSync(folder, { recursive: true });
    writeFileSync(knock, '');
  } catch {
    return write(); // a temp folder that cannot be written: the write waits for the lock as any other
  }
  try {
    return await write();
  } finally {
    rmSync(knock, { force: true });
  }
}

function knocked(folder: string): boolean {
  try {
    // No exception for a folder that is not there (existsSync pays for one each time).
    return statSync(folder, { throwIfNoEntry: false }) !== undefined && readdirSync(folder).length > 0;
  } catch {
    return false;
  }
}

/** When each folder was last found without a knock (performance.now()). */
const quietSince = new Map<string, number>();

/** True when an operator's write knocks on the database now (call `yieldTo` then, outside any transaction). */
export function isKnocked(ds: DataSource): boolean {
  const folder = folderOf(ds);
  if (folder === null) return false;
  const now = performance.now();
  const quiet = quietSince.get(folder);
  if (quiet !== undefined && now - quiet < NO_KNOCK_HOLDS_MS) return false;
  if (knocked(folder)) return true;
  quietSince.set(folder, now);
  return false;
}

/** Leaves the write lock free while someone knocks, up to a second. */
export async function yieldTo(ds: DataSource): Promise<void> {
  const folder = folderOf(ds);
  if (folder === null) return;
  const until = Date.now() + YIELD_AT_MOST_MS;
  while (knocked(folder) && Date.now() < until) await sleep(LOOK_EVERY_MS);
}

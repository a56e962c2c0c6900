// CPU time of processes by pid, from /proc (Linux): the bench's worker processes and the
// PostgreSQL backends serving them, so a loop's cost per file can be told apart from the share of
// two cores it happened to get on a shared machine.
import { readFileSync } from 'node:fs';
import type { DataSource } from 'typeorm';

/** Clock ticks per second of /proc's utime and stime (USER_HZ: 100 on every Linux the bench runs on). */
const TICKS_PER_SECOND = 100;

/** User + system CPU of `pid` in ms; undefined once the process is gone (or off Linux). */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces), from field 3 on: utime is 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/**
 * CPU ns of the given processes together, from /proc/<pid>/schedstat (nanoseconds, where stat
 * counts 10 ms ticks: for runs of a few hundred ms); a process gone meanwhile counts nothing.
 */
export function cpuNsOf(pids: number[]): number {
  let ns = 0;
  for (const pid of pids) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // Gone: its time went with it.
    }
  }
  return ns;
}

/** CPU ms by pid of the given processes. */
export function cpuOf(pids: number[]): Map<number, number> {
  const cpu = new Map<number, number>();
  for (const pid of pids) {
    const ms = processCpuMs(pid);
    if (ms !== undefined) cpu.set(pid, ms);
  }
  return cpu;
}

/** The client backends of `dataSource`'s database but its own connection's (the server on this machine). */
export async function backendPids(dataSource: DataSource): Promise<number[]> {
  const rows = (await dataSource.query(
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
  )) as { pid: number }[];
  return rows.map((row) => Number(row.pid));
}

/**
 * CPU used between two snapshots: a process seen only in the later one counts whole (a backend
 * started during the round, its start-up included); one gone before the later one is lost.
 */
export function cpuSpent(before: Map<number, number>, after: Map<number, number>): number {
  let spent = 0;
  for (const [pid, ms] of after) spent += ms - (before.get(pid) ?? 0);
  return spent;
}

import type { DataSource, EntityManager } from 'typeorm';
import { run } from '../core/run-statement';
import { dataSourceOf } from '../core/transaction';
import { dialectOf } from '../dialect';

/** The channel `resume`, `pause` and `cancel` notify where the dialect can (PostgreSQL), and waiting loops listen on. */
const CHANNEL = 'checkpoint_control';

/** Wakes the loops waiting on a job's state when `tx` commits (PostgreSQL NOTIFY is delivered on commit); nothing elsewhere. */
export async function notifyControl(tx: EntityManager): Promise<void> {
  const wakeups = dialectOf(dataSourceOf(tx)).wakeups;
  if (wakeups) await run(tx, wakeups.notify, [CHANNEL], 'waking waiting jobs');
}

interface Listening {
  waiters: Set<() => void>;
  close(): Promise<void>;
}

const listening = new Map<DataSource, Listening>();

/**
 * Calls `wake` whenever a control change is notified on `dataSource` (a waiting loop then reads its
 * state again), until the returned function is called. One listening connection per DataSource,
 * shared by every waiter and closed with the last; undefined where the dialect cannot listen.
 */
export function onControlChange(dataSource: DataSource, wake: () => void): (() => Promise<void>) | undefined {
  const wakeups = dialectOf(dataSource).wakeups;
  if (!wakeups) return undefined;
  let entry = listening.get(dataSource);
  if (!entry) {
    const waiters = new Set<() => void>();
    // A lost connection is re-established by `listen`, which then wakes everyone: their periodic check covers the gap.
    const listener = wakeups.listen(
      dataSource,
      CHANNEL,
      () => waiters.forEach((waiter) => waiter()),
      () => undefined,
    );
    entry = { waiters, close: () => listener.close() };
    listening.set(dataSource, entry);
  }
  const current = entry;
  current.waiters.add(wake);
  return async () => {
    current.waiters.delete(wake);
    if (current.waiters.size === 0 && listening.get(dataSource) === current) {
      listening.delete(dataSource);
      await current.close();
    }
  };
}

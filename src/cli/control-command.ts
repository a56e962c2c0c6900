import type { DataSource } from 'typeorm';
import { cancel, pause, resume } from '../control/pause';
import { type Outcome, success } from './outcome';

const DONE: Record<'pause' | 'resume' | 'cancel', string> = { pause: 'Paused', resume: 'Resumed', cancel: 'Cancelled' };
const UNCHANGED: Record<'pause' | 'resume' | 'cancel', string> = {
  pause: 'no active job or import batch by that name (unknown, done, paused already or cancelled)',
  resume: 'no paused job or import batch by that name',
  cancel: 'no unfinished job or import batch by that name (unknown, done or cancelled already)',
};

/**
 * `pause <name>`, `resume <name>`, `cancel <name>`: the operation on the batch or partitioned job
 * and the import batch of that name. A name with nothing to change is not an error (exit 0): the
 * result says so, so the command can be repeated safely.
 */
export async function controlCommand(db: DataSource, operation: 'pause' | 'resume' | 'cancel', name: string): Promise<Outcome> {
  const changed = await { pause, resume, cancel }[operation](db, name);
  const text = changed
    ? `${DONE[operation]} "${name}"${operation === 'pause' ? ': its loops stop after the batch in flight.' : '.'}`
    : `Nothing changed: ${UNCHANGED[operation]} "${name}".`;
  return success({ command: operation, name, changed }, [text]);
}

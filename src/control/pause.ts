import { validateName } from '../jobs/job-store';
import { controlEvent } from '../core/telemetry';
import { type Db, transact } from '../core/transaction';
import { changeState, IMPORTS, JOBS } from './control-store';
import { notifyControl } from './control-wakeups';
import { operatorWrite } from './operator-write';

/** One operation on both tables a name can be in: a batch or partitioned job, and an import batch. */
async function control(db: Db, name: string, operation: 'pause' | 'resume' | 'cancel'): Promise<boolean> {
  validateName(name);
  const changed = await operatorWrite(db, () =>
    transact(db, async (tx) => {
      const job = await changeState(tx, JOBS, operation, name);
      const imported = await changeState(tx, IMPORTS, operation, name);
      if (job || imported) await notifyControl(tx);
      return job || imported;
    }),
  );
  controlEvent(operation, { job: name, changed });
  return changed;
}

/**
 * Pauses the batch job, partitioned job or import batch `name`: its running loops, in this process
 * or any other, start no further batch (the one in flight commits) and return with
 * `stopped: 'paused'`; later calls return at once, or wait with `whilePaused: 'wait'`. False, and
 * nothing changed, when there is no such job, or it is done, paused already or cancelled.
 */
export function pause(db: Db, name: string): Promise<boolean> {
  return control(db, name, 'pause');
}

/**
 * Resumes a paused job or import batch (`'paused'` → `'active'`): the next call goes on where it
 * stopped, and calls waiting with `whilePaused: 'wait'` go on by themselves (at once on
 * PostgreSQL). False when there is no such job or it is not paused.
 */
export function resume(db: Db, name: string): Promise<boolean> {
  return control(db, name, 'resume');
}

/**
 * Cancels a job or import batch, paused or not: its loops stop as on a pause, and no call runs it
 * again until `reset` forgets it (an import: `replaceImport`). The work committed so far stays.
 * False when there is no such job, or it is done or cancelled already.
 */
export function cancel(db: Db, name: string): Promise<boolean> {
  return control(db, name, 'cancel');
}

/**
 * What an operator asked of a batch job, partitioned job or import batch, kept on its row:
 * `'active'` (run), `'paused'` (start no further batch until resumed) or `'cancelled'` (final until `reset`).
 * @inline
 */
export type ControlState = 'active' | 'paused' | 'cancelled';

/**
 * Why a call returned before its job's natural end: an operator's `pause` or `cancel`, its
 * `maxRuntimeMs`, or its `signal`.
 * @inline
 */
export type StopReason = 'paused' | 'cancelled' | 'time' | 'signal';

/** The state a job row holds: `'active'` unless it says `'paused'` or `'cancelled'`. */
export function controlStateOf(state: unknown): ControlState {
  return state === 'paused' || state === 'cancelled' ? state : 'active';
}

/**
 * The job row's state as the loop reads it before a batch: undefined to go on, else why it stops.
 * The one place every loop (`eachBatch`, `eachPartition`, `importFile`) asks.
 */
export function stopFor(row: { state?: unknown } | undefined): 'paused' | 'cancelled' | undefined {
  const state = controlStateOf(row?.state);
  return state === 'active' ? undefined : state;
}

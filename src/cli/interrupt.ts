/** Exit code of a second Ctrl-C (128 + SIGINT), the shell's convention for "killed by Ctrl-C". */
export const EXIT_SIGINT = 130;

/**
 * While `fn` runs, the first Ctrl-C (SIGINT, or a SIGTERM from `kill`/`docker stop`) aborts
 * `controller` so the work stops after the chunk in flight commits; a second one exits at once
 * (the uncommitted chunk then rolls back in the database).
 */
export async function stopOnInterrupt<T>(controller: AbortController, notify: (message: string) => void, fn: () => Promise<T>): Promise<T> {
  const onSignal = (): void => {
    if (controller.signal.aborted) process.exit(EXIT_SIGINT);
    notify('Stopping after the current chunk commits (Ctrl-C again to quit at once)...');
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await fn();
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

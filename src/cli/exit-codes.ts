/** The command finished its job. */
export const EXIT_OK = 0;
/** A runtime failure (database unreachable, an interrupted import, …): rerunning may succeed. */
export const EXIT_FAILURE = 1;
/** Usage or input the command cannot accept as given: rerunning unchanged will fail again. */
export const EXIT_USAGE = 2;

// Codes that mean "the invocation or its input is wrong": a changed file under an existing batch
// id (FINGERPRINT_MISMATCH) belongs here, since only another file, batch id or --replace helps.
const USAGE_CODES = new Set(['INVALID_ARGUMENT', 'INVALID_INPUT', 'FINGERPRINT_MISMATCH', 'NON_SERIALIZABLE', 'NON_UNIQUE_KEY']);

/** The process exit code for an error `code`. */
export function exitCodeFor(code: string): number {
  return USAGE_CODES.has(code) ? EXIT_USAGE : EXIT_FAILURE;
}

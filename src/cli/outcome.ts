import { CheckpointError } from '../core/errors';
import { EXIT_FAILURE, EXIT_OK, exitCodeFor } from './exit-codes';

/** What a command prints and how the process exits. */
export interface Outcome {
  exitCode: number;
  /** The one line printed on stdout with `--json`. */
  json: Record<string, unknown> & { ok: boolean };
  /** Human-readable lines: stdout when ok, stderr otherwise. */
  text: string[];
}

/** A command that did its job. */
export function success(json: Record<string, unknown>, text: string[]): Outcome {
  return { exitCode: EXIT_OK, json: { ok: true, ...json }, text };
}

/**
 * A command that failed: `{ ok: false, code, message, hint?, index? }` plus `details`. The code is
 * the error's stable `code` (a driver or system code such as ENOENT for foreign errors); the hint
 * says what to do about it on the command line.
 */
export function failure(error: unknown, hint?: string, details: Record<string, unknown> = {}): Outcome {
  const code = errorCode(error);
  const message = error instanceof Error ? error.message : String(error);
  const json: Outcome['json'] = { ok: false, code, message, ...details };
  if (hint) json.hint = hint;
  const index = (error as { index?: unknown } | null)?.index;
  if (typeof index === 'number') json.index = index;
  const field = (error as { field?: unknown } | null)?.field;
  if (typeof field === 'string') json.field = field;
  const text = [`${code}: ${message}`, ...(hint ? [`hint: ${hint}`] : [])];
  return { exitCode: error instanceof CheckpointError ? exitCodeFor(code) : EXIT_FAILURE, json, text };
}

/** A command that stopped before finishing on purpose (Ctrl-C): not an error, but not done either. */
export function interrupted(message: string, json: Record<string, unknown>): Outcome {
  return { exitCode: EXIT_FAILURE, json: { ok: false, code: 'INTERRUPTED', message, ...json }, text: [`INTERRUPTED: ${message}`] };
}

function errorCode(error: unknown): string {
  if (error instanceof CheckpointError) return error.code;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.length > 0 ? code : 'UNEXPECTED_ERROR';
}

/** Prints the outcome: exactly one JSON line on stdout with `--json`, else readable text. */
export function printOutcome(outcome: Outcome, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(outcome.json)}\n`);
  } else if (outcome.json.ok) {
    if (outcome.text.length > 0) process.stdout.write(`${outcome.text.join('\n')}\n`);
  } else {
    process.stderr.write(`typeorm-checkpoint: ${outcome.text.join('\n')}\n`);
  }
}

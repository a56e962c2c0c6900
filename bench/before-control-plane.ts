// The library as it was just before the control plane (pause, resume, cancel, throttle, time
// slices, estimates) was added, unpacked from git into a scratch folder, so a bench can run the
// same work on this tree and on it in processes alike and report the control plane's cost.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BenchResult, result } from './bench-result';
import type { Pair } from './timing';

/** The last commit before the control plane: the commit after it (3b326bb) added it, with the work of three sessions. */
export const BEFORE = '9926d7fc1a79dffb9d1f148186b5fb5497851acc';
/** This tree's root: a worker given it loads this tree's library from `<root>/src`. */
export const ROOT = join(__dirname, '..');

export interface UnpackedTree {
  root: string;
  remove: () => void;
}

/**
 * The library at BEFORE (src, entities, migrations) beside a link to this tree's node_modules, or
 * null after logging why (the commit is not in this checkout, as in a shallow clone).
 */
export function unpackBefore(log: (line: string) => void, what: string): UnpackedTree | null {
  const root = mkdtempSync(join(tmpdir(), 'ck-before-'));
  try {
    const archive = execFileSync('git', ['archive', BEFORE, 'src', 'entities', 'migrations'], { cwd: ROOT, maxBuffer: 1 << 28 });
    execFileSync('tar', ['-x', '-C', root], { input: archive });
    symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    log(`  ${what}: skipped, commit ${BEFORE.slice(0, 7)} is not in this checkout (${String(error)})`);
    return null;
  }
  return { root, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/** The report line of a same-run comparison with BEFORE: `subject`'s time now over its time then, at most 1.02×. */
export function controlPlaneCost(subject: string, detail: string, pair: Pair): BenchResult {
  return result(
    `${subject} with the control plane vs before it (${BEFORE.slice(0, 7)})${detail}`,
    pair.candidate,
    'ms',
    pair.baseline,
    pair.ratio,
    { max: 1.02 },
  );
}

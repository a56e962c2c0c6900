import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = join(__dirname, '..', '..');

/** Node's arguments that run a TypeScript file: swc's require hook (register.js) and source-mapped stack traces. */
export const TYPESCRIPT_NODE_ARGS = ['--enable-source-maps', '-r', join(__dirname, 'register.js'), '-r', 'reflect-metadata'];

/** A child process running a TypeScript file, transpiled by swc as it loads (register.js). */
export interface Child {
  process: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal) and the signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Every stdout line so far. */
  lines: string[];
  /** Resolves with the first stdout line (from now on, or already seen) that satisfies `match`. */
  waitForLine(match: (line: string) => boolean): Promise<string>;
  stderr(): string;
  /** Writes one line to the child's stdin (e.g. a "go" signal a fixture waits for). */
  send(line: string): void;
}

export function startChild(script: string, args: string[] = [], env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, [...TYPESCRIPT_NODE_ARGS, join(ROOT, script), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const waiters: { match: (line: string) => boolean; resolve: (line: string) => void; reject: (e: Error) => void }[] = [];
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line);
    for (const waiter of [...waiters]) {
      if (waiter.match(line)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
    }
  });
  child.stdin?.on('error', () => undefined); // a child that exits before reading its stdin is not a test failure
  let closed = false;
  // 'close', not 'exit': 'exit' may come before the last of the child's stdout is read, and a line
  // the child did print must not be reported as missing.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => {
      closed = true;
      for (const waiter of waiters.splice(0)) {
        waiter.reject(new Error(`child ${script} exited (${code ?? signal}) before the expected line; stderr:\n${stderr}`));
      }
      resolve({ code, signal });
    }),
  );
  return {
    process: child,
    exited,
    lines,
    stderr: () => stderr,
    send(line) {
      child.stdin?.write(`${line}\n`);
    },
    waitForLine(match) {
      const seen = lines.find(match);
      if (seen !== undefined) return Promise.resolve(seen);
      if (closed) {
        return Promise.reject(new Error(`child ${script} already exited; stderr:\n${stderr}`));
      }
      return new Promise((resolve, reject) => waiters.push({ match, resolve, reject }));
    },
  };
}

/** Kills the child with SIGKILL and waits until it is gone. */
export async function kill(child: Child): Promise<void> {
  if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
  await child.exited;
}

/** Runs a child to completion and fails with its stderr if it exits non-zero. */
export async function runChild(script: string, args: string[] = [], env: Record<string, string> = {}): Promise<Child> {
  const child = startChild(script, args, env);
  const { code, signal } = await child.exited;
  if (code !== 0) throw new Error(`child ${script} ${args.join(' ')} failed (${code ?? signal}):\n${child.stderr()}`);
  return child;
}

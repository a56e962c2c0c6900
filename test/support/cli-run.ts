import { expect } from 'chai';
import { type Child, startChild } from './child';

const CLI = 'src/cli/main.ts';

export interface CliRun {
  code: number | null;
  stdout: string[];
  stderr: string;
}

/** Waits for the child to exit and its output streams to close (so every stdout line is in). */
export async function finished(child: Child): Promise<CliRun> {
  const closed = new Promise<void>((resolve) => child.process.once('close', () => resolve()));
  const { code } = await child.exited;
  await closed;
  return { code, stdout: child.lines, stderr: child.stderr() };
}

/** Starts the CLI as a child process (its TypeScript transpiled by swc as it loads). */
export function startCli(args: string[], env: Record<string, string> = {}): Child {
  return startChild(CLI, args, env);
}

/** Runs the CLI as a child process to its end. */
export function cli(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  return finished(startCli(args, env));
}

/** Runs the CLI with `--json` and parses its one stdout line. */
export async function cliJson(args: string[], env: Record<string, string> = {}): Promise<CliRun & { json: Record<string, any> }> {
  const run = await cli([...args, '--json'], env);
  expect(run.stdout, `stdout of ${args.join(' ')}; stderr:\n${run.stderr}`).to.have.length(1);
  return { ...run, json: JSON.parse(run.stdout[0]) as Record<string, any> };
}

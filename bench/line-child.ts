// A bench process spoken to one line at a time: the parent writes a command line, the child answers
// with one line. The parent keeps no history of the lines and scans none: between two measured
// requests it runs as little JavaScript of its own as it can.
import { spawn } from 'node:child_process';

export interface LineChild {
  pid: number;
  /** Writes `line` to the child's stdin and resolves with the next line it prints. */
  ask(line: string): Promise<string>;
  /** Closes the child's stdin (its signal to end) and waits for it to exit. */
  close(): Promise<void>;
}

/**
 * Starts `node <args>` and resolves once it printed its first line, "ready". The child answers
 * commands in order, so each printed line settles the oldest unanswered one.
 */
export async function startLineChild(args: string[], env: Record<string, string> = {}): Promise<LineChild> {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  const waiting: { resolve: (line: string) => void; reject: (error: Error) => void }[] = [];
  let stderr = '';
  let buffered = '';
  let failure: Error | undefined;
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      waiting.shift()?.resolve(line);
    }
  });
  child.stdin.on('error', () => undefined); // a child that died is reported by 'exit' below
  const exited = new Promise<void>((resolve) =>
    child.on('exit', (code, signal) => {
      if (code !== 0) failure = new Error(`${args.join(' ')} exited (${code ?? signal}):\n${stderr}`);
      for (const waiter of waiting.splice(0)) waiter.reject(failure ?? new Error(`${args.join(' ')} exited before answering`));
      resolve();
    }),
  );
  const next = () =>
    new Promise<string>((resolve, reject) => {
      if (child.exitCode !== null || child.signalCode !== null) reject(failure ?? new Error(`${args.join(' ')} has exited`));
      else waiting.push({ resolve, reject });
    });
  const ready = await next();
  if (ready !== 'ready') {
    child.kill();
    throw new Error(`${args.join(' ')} printed ${JSON.stringify(ready)} before "ready"`);
  }
  return {
    pid: child.pid!,
    ask(line) {
      const answer = next();
      child.stdin.write(`${line}\n`);
      return answer;
    },
    async close() {
      child.stdin.end();
      await exited;
      if (failure) throw failure;
    },
  };
}

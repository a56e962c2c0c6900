import { open } from 'node:fs/promises';
import { expect } from 'chai';

/**
 * Runs `fn` counting the file blocks read at each position, and returns the blocks read more than
 * once from the fourth to the last whole block before `offset` (the digest pass reads each block
 * once; the header's reading, with its read-ahead, may read the first three again).
 */
export async function readsBefore<T>(offset: number, fn: () => Promise<T>): Promise<{ result: T; twice: [number, number][] }> {
  const block = 64 * 1024;
  expect(Math.floor(offset / block)).to.be.at.least(10);
  const reads = new Map<number, number>();
  const handle = await open(__filename, 'r');
  const prototype = Object.getPrototypeOf(handle) as { read: (...args: unknown[]) => Promise<unknown> };
  await handle.close();
  const read = prototype.read;
  prototype.read = function (this: unknown, ...args: unknown[]) {
    const position = Number(args[3]);
    reads.set(position, (reads.get(position) ?? 0) + 1);
    return read.apply(this, args);
  };
  try {
    const result = await fn();
    const twice = [...reads].filter(([position, n]) => n > 1 && position >= 3 * block && position + block <= offset);
    return { result, twice };
  } finally {
    prototype.read = read;
  }
}

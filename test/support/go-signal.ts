import { createInterface } from 'node:readline';

/** In a fixture: resolves when the parent sends a line on stdin, so several workers start together. */
export function waitForGo(): Promise<void> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin });
    lines.once('line', () => {
      lines.close();
      // An open stdin pipe would keep the worker alive after its work is done.
      process.stdin.destroy();
      resolve();
    });
  });
}

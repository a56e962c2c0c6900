import { createInterface } from 'node:readline';

/** In a fixture: resolves when the parent sends a line on stdin, so several workers start together. */
export function waitForGo(): Promise<void> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin });
    lines.once('line', () => {
      lines.close();
      resolve();
    });
  });
}

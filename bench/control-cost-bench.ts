// The control plane's cost to a plain eachBatch copy: the same copy run by this tree's library and
// by the library as it was just before the control plane (before-control-plane.ts). Both run in worker
// processes of the same kind against the same database and tables, taking turns round by round.
import { type Child, startChild } from '../test/support/child';
import { BEFORE, controlPlaneCost, ROOT, unpackBefore } from './before-control-plane';
import { type BenchDriver, createBenchDatabase } from './bench-database';
import type { BenchResult } from './bench-result';
import { createTables } from './each-batch-bench';
import { sideBySide } from './timing';

const WORKER = 'bench/workers/batch-copy-worker.ts';

export interface ControlCostOptions {
  rows: number;
  warmups: number;
  repeats: number;
  log: (line: string) => void;
}

async function copier(root: string, url: string): Promise<{ run: (job: string) => Promise<number>; close: () => Promise<void> }> {
  const child: Child = startChild(WORKER, [root, url]);
  await child.waitForLine((line) => line === 'ready');
  return {
    async run(job) {
      const mark = child.lines.length;
      child.send(`go ${job}`);
      const line = await child.waitForLine((l) => l.startsWith('ms ') && child.lines.lastIndexOf(l) >= mark);
      return Number(line.slice(3));
    },
    async close() {
      child.send('exit');
      await child.exited;
    },
  };
}

export async function controlCostBench(drivers: BenchDriver[], options: ControlCostOptions): Promise<BenchResult[]> {
  const before = unpackBefore(options.log, 'control-plane cost');
  if (before === null) return [];
  const results: BenchResult[] = [];
  try {
    for (const driver of drivers.filter((d) => d !== 'mysql')) {
      const database = await createBenchDatabase(driver, 'control');
      try {
        const ds = await database.open();
        await createTables(ds, driver, options.rows);
        const now = await copier(ROOT, database.url);
        const then = await copier(before.root, database.url);
        try {
          options.log(`  ${driver}: eachBatch copy, this tree vs ${BEFORE.slice(0, 7)} (before the control plane)…`);
          let round = 0;
          const pair = await sideBySide({
            warmups: options.warmups,
            repeats: options.repeats,
            prepare: async () => void (round += 1),
            candidate: () => now.run(`control-now-${round}`),
            baseline: () => then.run(`control-before-${round}`),
          });
          results.push(controlPlaneCost(`eachBatch copy ${options.rows.toLocaleString('en-US')} rows`, ` [${driver}]`, pair));
        } finally {
          await Promise.all([now.close(), then.close()]);
        }
      } finally {
        await database.drop();
      }
    }
  } finally {
    before.remove();
  }
  return results;
}

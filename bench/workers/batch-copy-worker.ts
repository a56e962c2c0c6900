// One eachBatch copy process for the control-plane cost bench. argv: <library root> <db url>.
// The library is loaded from <library root>/src: this tree's, or an earlier commit's unpacked
// beside it, so both versions copy the same table through the same database in processes alike.
// "go <job>" empties bench_target, copies bench_source into it with eachBatch + sqlSource in
// batches of 1,000 and prints "ms <copy time>"; "exit" ends the process.
import 'reflect-metadata';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DataSource, type EntityManager } from 'typeorm';
import type * as Library from '../../src';
import { commands } from './worker-protocol';

const [root, url] = process.argv.slice(2);

async function main(): Promise<void> {
  const library = require(join(root, 'src')) as typeof Library;
  const ds = new DataSource({ ...library.dataSourceOptionsFromUrl(url), entities: library.checkpointEntities });
  await ds.initialize();
  const postgres = ds.options.type === 'postgres';
  const insert = (tx: EntityManager, rows: Record<string, unknown>[]) => {
    let n = 0;
    const values = rows.map(() => (postgres ? `($${++n}, $${++n}, $${++n})` : '(?, ?, ?)')).join(', ');
    return tx.query(
      `INSERT INTO bench_target (id, name, amount) VALUES ${values}`,
      rows.flatMap((row) => [row.id, row.name, row.amount]),
    );
  };
  console.log('ready');
  for await (const command of commands()) {
    if (command === 'exit') break;
    const job = command.slice('go '.length);
    await ds.query('DELETE FROM bench_target');
    await library.reset(ds, job);
    const started = performance.now();
    const source = await library.sqlSource(ds, 'bench_source', 'id');
    const outcome = await library.eachBatch(ds, job, source, 1000, (items, tx) => insert(tx, items));
    const ms = performance.now() - started;
    if (!outcome.done) throw new Error('eachBatch did not finish');
    console.log(`ms ${ms}`);
  }
  await ds.destroy();
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

// One eachPartition worker process for the partitions bench. argv: <db url> <io|copy> <limit> <partitions>.
// "go <job>" runs eachPartition over bench_source once (io: the handler awaits 10 ms per batch, as a
// call to another service would; copy: it inserts the batch into bench_target) and prints
// "done <items> <stopped|-> <JSON of each batch's handler end, epoch ms>", after "started" once its
// first batch of the call ended (the pause bench waits for every process's); "exit" ends the process.
import 'reflect-metadata';
import { DataSource, type EntityManager } from 'typeorm';
import { checkpointEntities, dataSourceOptionsFromUrl, eachPartition, sqlSource } from '../../src';
import { commands } from './worker-protocol';

const [url, mode, limit, partitions] = process.argv.slice(2);

async function insertRows(tx: EntityManager, postgres: boolean, rows: Record<string, unknown>[]): Promise<void> {
  let n = 0;
  const values = rows.map(() => (postgres ? `($${++n}, $${++n}, $${++n})` : '(?, ?, ?)')).join(', ');
  await tx.query(
    `INSERT INTO bench_target (id, name, amount) VALUES ${values}`,
    rows.flatMap((row) => [row.id, row.name, row.amount]),
  );
}

async function main(): Promise<void> {
  const ds = new DataSource({ ...dataSourceOptionsFromUrl(url), entities: checkpointEntities });
  await ds.initialize();
  const postgres = ds.options.type === 'postgres';
  // The I/O-bound job reads only its keys (as a job calling another service with ids would).
  const source = await sqlSource(ds, 'bench_source', 'id', mode === 'io' ? { columns: ['id'] } : {});
  let ends: number[] = [];
  const ended = () => {
    if (ends.push(Date.now()) === 1) console.log('started');
  };
  const handler =
    mode === 'io'
      ? () => new Promise<void>((resolve) => setTimeout(resolve, 10)).then(ended)
      : (items: Record<string, unknown>[], tx: EntityManager) => insertRows(tx, postgres, items).then(ended);
  console.log('ready');
  for await (const command of commands()) {
    if (command === 'exit') break;
    const job = command.slice('go '.length);
    ends = [];
    const result = await eachPartition(ds, job, source, Number(limit), handler, { partitions: Number(partitions) });
    console.log(`done ${result.items} ${result.stopped ?? '-'} ${JSON.stringify(ends)}`);
  }
  await ds.destroy();
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

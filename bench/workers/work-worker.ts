// One worker process of the `workers` bench section. Modes:
//   work        manager.work() with its defaults (concurrency 1, batchSize 10, commitEvery 1)
//   work-chunk  manager.work({ commitEvery: 10 })
//   hand-loop   the README's former hand-written loop: claimNext(10), then processFile per file
//   wake        manager.work({ pollMs: 5000 }) kept running: prints `start <i> <epoch ms>` as each handler starts
// Every handler inserts one row into bench_rows through `tx`. Each "go" line runs one round over the
// prepared queue (drain) and ends with "done"; "exit" ends the process. argv: <mode> <db url> <worker>
// [<library root> [<idle ms>]]: the library is loaded from <root>/src, this tree's by default, or an
// earlier commit's unpacked beside it (workers-cost-bench.ts); pooled connections idle for <idle ms>
// (default 1,000) are closed.
import 'reflect-metadata';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DataSource, type EntityManager } from 'typeorm';
import type * as Library from '../../src';
import { commands, emit, flush, processStats } from './worker-protocol';

const [mode, url, workerArg, root = join(__dirname, '..', '..'), idleArg = '1000'] = process.argv.slice(2);
const { CheckpointManager, checkpointEntities, dataSourceOptionsFromUrl } = require(join(root, 'src')) as typeof Library;
const workerId = `bench-${mode}-${workerArg}-${process.pid}`;
const IDLE_MS = Number(idleArg);
export const INSERT_ROW = 'INSERT INTO bench_rows (file_index, worker) VALUES ($1, $2)';

const indexOf = (fileUrl: string) => Number(fileUrl.slice(-10, -4));

async function handle(file: Library.FileCheckpoint, tx: EntityManager | undefined) {
  const i = indexOf(file.fileUrl);
  await tx!.query(INSERT_ROW, [i, workerId]);
  emit(`ok ${i}`);
  return processStats(i);
}

async function main(): Promise<void> {
  // Idle connections close after a second: every pool of the bench stays up between its rounds, under max_connections.
  const dataSource = new DataSource({
    ...dataSourceOptionsFromUrl(url),
    entities: checkpointEntities,
    extra: { idleTimeoutMillis: IDLE_MS },
  });
  await dataSource.initialize();
  const manager = new CheckpointManager(dataSource, { workerId });
  if (mode === 'wake') {
    const worker = manager.work(
      (file) => {
        // Wall-clock ms with sub-ms precision, comparable with the parent's on the same machine.
        console.log(`start ${indexOf(file.fileUrl)} ${performance.timeOrigin + performance.now()}`);
        return processStats(0);
      },
      { pollMs: 5000 },
    );
    emit('ready');
    flush();
    for await (const command of commands()) if (command === 'exit') break;
    await worker.stop();
    await dataSource.destroy();
    process.exit(0);
  }
  emit('ready');
  flush();
  for await (const command of commands()) {
    if (command === 'exit') break;
    if (mode === 'work') await manager.work(handle, { drain: true }).done;
    else if (mode === 'work-chunk') await manager.work(handle, { drain: true, commitEvery: 10 }).done;
    else if (mode === 'hand-loop') {
      for (let batch; (batch = await manager.claimNext(10)).length > 0;) {
        for (const file of batch) await manager.processFile(file.fileUrl, file.fileType, file.fileTimestamp, (tx) => handle(file, tx));
      }
    } else throw new Error(`unknown mode ${mode}`);
    emit('done');
    flush();
  }
  await dataSource.destroy();
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

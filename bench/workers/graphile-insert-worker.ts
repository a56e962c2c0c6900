// One graphile-worker 0.17 process (concurrency 1, local queue of 10) whose task inserts the same
// one row per job into bench_rows as the library's handler, the way its users write it: one
// statement through the task's pg client, its own transaction. Runs from start to "exit".
import { Logger, run } from 'graphile-worker';
import { commands, emit, flush, flushSoon } from './worker-protocol';

const [url, workerArg] = process.argv.slice(2);
const workerId = `bench-graphile-${workerArg}-${process.pid}`;

async function main(): Promise<void> {
  const runner = await run({
    connectionString: url,
    concurrency: 1,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: new Logger(() => () => undefined),
    preset: { worker: { localQueue: { size: 10 } } },
    taskList: {
      bench: async (payload, helpers) => {
        const i = (payload as { i: number }).i;
        await helpers.query('INSERT INTO bench_rows (file_index, worker) VALUES ($1, $2)', [i, workerId]);
        emit(`ok ${i}`);
        flushSoon();
      },
    },
  });
  emit('ready');
  flush();
  for await (const command of commands()) if (command === 'exit') break;
  await runner.stop();
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

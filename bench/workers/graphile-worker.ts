// One graphile-worker 0.17 process: concurrency 1 with a local queue of 10 jobs. It runs from start
// to "exit"; the parent adds a round's jobs and counts the "ok" lines to time the round.
import { run } from 'graphile-worker';
import { commands, emit, flush } from './worker-protocol';

const [url] = process.argv.slice(2);

async function main(): Promise<void> {
  const quiet = () => () => undefined;
  const { Logger } = await import('graphile-worker');
  const runner = await run({
    connectionString: url,
    concurrency: 1,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: new Logger(quiet),
    preset: { worker: { localQueue: { size: 10 } } },
    taskList: {
      bench: async (payload) => {
        emit(`ok ${(payload as { i: number }).i}`);
        // Lines are flushed per job here: graphile-worker has no "round" to end.
        flush();
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

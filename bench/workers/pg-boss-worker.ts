// One pg-boss 10 process: fetch a batch of jobs, process them, complete them, until the queue is
// empty. (pg-boss's own `work` polls at most every 0.5 s; the fetch loop measures the queue itself.)
import PgBoss from 'pg-boss';
import { commands, emit, flush } from './worker-protocol';

const [url, batchArg] = process.argv.slice(2);
const batchSize = Number(batchArg);
export const QUEUE = 'bench';

async function round(boss: PgBoss): Promise<void> {
  for (;;) {
    const jobs = await boss.fetch<{ i: number }>(QUEUE, { batchSize });
    if (jobs.length === 0) return;
    for (const job of jobs) emit(`ok ${job.data.i}`);
    await boss.complete(
      QUEUE,
      jobs.map((job) => job.id),
    );
  }
}

async function main(): Promise<void> {
  const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false, migrate: false, max: 2 });
  boss.on('error', (error) => console.error(error));
  await boss.start();
  emit('ready');
  flush();
  for await (const command of commands()) {
    if (command === 'exit') break;
    await round(boss);
    emit('done');
    flush();
  }
  await boss.stop({ graceful: false, wait: false });
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

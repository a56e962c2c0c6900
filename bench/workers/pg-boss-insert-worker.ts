// One pg-boss 10 process: fetch 10 jobs, insert each job's row into bench_rows in its own
// transaction (one statement on a pooled connection, as its users write it), complete the batch;
// until the queue is empty.
import { Pool } from 'pg';
import PgBoss from 'pg-boss';
import { commands, emit, flush } from './worker-protocol';

const [url, workerArg] = process.argv.slice(2);
const workerId = `bench-pg-boss-${workerArg}-${process.pid}`;
const QUEUE = 'bench';

async function round(boss: PgBoss, pool: Pool): Promise<void> {
  for (;;) {
    const jobs = await boss.fetch<{ i: number }>(QUEUE, { batchSize: 10 });
    if (jobs.length === 0) return;
    for (const job of jobs) {
      await pool.query('INSERT INTO bench_rows (file_index, worker) VALUES ($1, $2)', [job.data.i, workerId]);
      emit(`ok ${job.data.i}`);
    }
    await boss.complete(
      QUEUE,
      jobs.map((job) => job.id),
    );
  }
}

async function main(): Promise<void> {
  // Idle connections close after a second (pg-boss hands its options to pg's Pool), as the library's workers' do.
  const idle = { idleTimeoutMillis: 1000 };
  const boss = new PgBoss({
    connectionString: url,
    supervise: false,
    schedule: false,
    migrate: false,
    max: 2,
    ...idle,
  } as PgBoss.ConstructorOptions);
  boss.on('error', (error) => console.error(error));
  await boss.start();
  const pool = new Pool({ connectionString: url, max: 1, ...idle });
  emit('ready');
  flush();
  for await (const command of commands()) {
    if (command === 'exit') break;
    await round(boss, pool);
    emit('done');
    flush();
  }
  await pool.end();
  await boss.stop({ graceful: false, wait: false });
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

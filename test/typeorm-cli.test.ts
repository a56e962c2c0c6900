import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';
import { DataSource } from 'typeorm';
import { checkpointMigrations, dataSourceOptionsFromUrl } from '../src';
import { count, createTestDatabase, DRIVER, type TestDatabase } from './support/database';

const ROOT = join(__dirname, '..');
// TypeORM's own CLI with ts-node registered (the same bin on TypeORM 0.3 and 1.x), as an
// application runs it against its DataSource file.
const TYPEORM_CLI = join(ROOT, 'node_modules', '.bin', 'typeorm-ts-node-commonjs');
const DATA_SOURCE = 'test/fixtures/typeorm-data-source.ts';
const ANSI_ESCAPE = /\x1b\[[0-9;]*m/g;
const SCHEMA_CHANGE = /\b(CREATE|ALTER|DROP)\b/i;
const MIGRATIONS = checkpointMigrations.length;

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `typeorm-ts-node-commonjs <command> -d <fixture>` on `url` as a child process. */
function typeorm(url: string, command: string): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [TYPEORM_CLI, command, '-d', DATA_SOURCE],
      { cwd: ROOT, env: { ...process.env, CHECKPOINT_TEST_DATABASE_URL: url, NO_COLOR: '1', FORCE_COLOR: '0' } },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout: stdout.replace(ANSI_ESCAPE, ''), stderr });
      },
    );
  });
}

async function expectSuccess(run: Promise<CliRun>): Promise<CliRun> {
  const result = await run;
  expect(result.code, `${result.stdout}\n${result.stderr}`).to.equal(0);
  return result;
}

/** Opens the database without running any migration, to look at what the CLI did. */
async function inspect<T>(url: string, look: (ds: DataSource) => Promise<T>): Promise<T> {
  const ds = new DataSource(dataSourceOptionsFromUrl(url));
  await ds.initialize();
  try {
    return await look(ds);
  } finally {
    await ds.destroy();
  }
}

const TABLES = ['checkpoint_jobs', 'checkpoint_imports', 'checkpoint_import_items', 'file_checkpoints', 'checkpoint_import_rejects'];

async function tablesPresent(ds: DataSource): Promise<string[]> {
  const runner = ds.createQueryRunner();
  try {
    const present: string[] = [];
    for (const table of TABLES) if (await runner.hasTable(table)) present.push(table);
    return present;
  } finally {
    await runner.release();
  }
}

describe(`TypeORM's migration CLI (${DRIVER})`, function () {
  const databases: TestDatabase[] = [];

  async function emptyDatabase(label: string): Promise<string> {
    const database = await createTestDatabase(label);
    databases.push(database);
    return database.url;
  }

  after(async () => {
    for (const database of databases) await database.drop();
  });

  it('migration:run twice (the second has nothing to do), then schema:log reports no changes', async () => {
    const url = await emptyDatabase('typeorm_cli');
    await expectSuccess(typeorm(url, 'migration:run'));
    expect(await inspect(url, tablesPresent)).to.deep.equal(TABLES);
    expect(await inspect(url, (ds) => count(ds, 'SELECT COUNT(*) FROM migrations'))).to.equal(MIGRATIONS);

    const second = await expectSuccess(typeorm(url, 'migration:run'));
    expect(second.stdout).to.not.match(SCHEMA_CHANGE);
    expect(await inspect(url, (ds) => count(ds, 'SELECT COUNT(*) FROM migrations'))).to.equal(MIGRATIONS);

    const log = await expectSuccess(typeorm(url, 'schema:log'));
    expect(log.stdout).to.include('Your schema is up to date');
    expect(log.stdout).to.not.match(SCHEMA_CHANGE);
  });

  it('runs the migrations again over existing tables when TypeORM has lost its record of them', async () => {
    const url = await emptyDatabase('typeorm_cli_rerun');
    await expectSuccess(typeorm(url, 'migration:run'));
    // Rows written meanwhile must survive the second run of the migrations.
    await inspect(url, async (ds) => {
      await ds.query('DELETE FROM migrations');
      await ds.query(
        "INSERT INTO checkpoint_jobs (name, kind, done, batches, items, started_at, updated_at) VALUES ('kept', 'step', 1 = 1, 0, 0, 1, 1)",
      );
    });

    await expectSuccess(typeorm(url, 'migration:run'));
    expect(await inspect(url, (ds) => count(ds, 'SELECT COUNT(*) FROM migrations'))).to.equal(MIGRATIONS);
    expect(await inspect(url, (ds) => count(ds, "SELECT COUNT(*) FROM checkpoint_jobs WHERE name = 'kept'"))).to.equal(1);

    const log = await expectSuccess(typeorm(url, 'schema:log'));
    expect(log.stdout).to.include('Your schema is up to date');
  });
});

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Command, CommanderError, InvalidArgumentError as CommanderArgumentError, Option } from 'commander';
import type { DataSource } from 'typeorm';
import { DEFAULT_PRUNE_KINDS } from '../control/prune';
import { InvalidArgumentError } from '../core/errors';
import { controlCommand } from './control-command';
import { dashboardCommand } from './dashboard-command';
import { EXIT_OK } from './exit-codes';
import { filesCommand } from './files-command';
import { filesControlCommand } from './files-control-command';
import { importCommand, type ImportCommandOptions } from './import-command';
import { listCommand } from './list-command';
import { migrateCommand } from './migrate-command';
import { databaseUrl, displayUrl, openDatabase } from './open-database';
import { failure, type Outcome, printOutcome } from './outcome';
import { progressMode } from './progress-reporter';
import { parseDuration, parseKinds, pruneCommand, type PruneCommandOptions } from './prune-command';
import { rejectsCommand } from './rejects-command';
import { resetCommand } from './reset-command';
import { retryDeadCommand } from './retry-dead-command';
import { statusCommand } from './status-command';

interface GlobalOptions {
  db?: string;
  json?: boolean;
  progress: boolean;
}

/** The package version, from the package.json above this file (src/cli or dist/src/cli). */
function packageVersion(): string {
  for (let dir = __dirname; dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) continue;
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
    if (manifest.name === 'typeorm-checkpoint') return manifest.version ?? '0.0.0';
  }
  return '0.0.0';
}

function nonNegativeInteger(value: string): number {
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(n)) throw new CommanderArgumentError('expected a non-negative integer.');
  return n;
}

/** A repeatable option's values, in order. */
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function names(value: string): string[] {
  const list = value.split(',').map((name) => name.trim());
  if (list.some((name) => name.length === 0)) throw new CommanderArgumentError('expected comma-separated names.');
  return list;
}

function oneCharacter(value: string): string {
  const character = value === '\\t' ? '\t' : value;
  if (character.length !== 1) throw new CommanderArgumentError('expected one character (\\t for a tab).');
  return character;
}

function positiveInteger(value: string): number {
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new CommanderArgumentError('expected a positive integer.');
  }
  return n;
}

function portNumber(value: string): number {
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || n > 65535) throw new CommanderArgumentError('expected a port number from 0 to 65535.');
  return n;
}

/** Opens the database, runs the command, always closes the database; errors become failure outcomes. */
async function execute(
  command: Command,
  migrate: boolean,
  fn: (db: DataSource, database: string, options: GlobalOptions) => Promise<Outcome>,
): Promise<Outcome> {
  const options = command.optsWithGlobals<GlobalOptions>();
  const url = databaseUrl(options.db);
  let db: DataSource | undefined;
  try {
    db = await openDatabase(url, { migrate });
    return await fn(db, displayUrl(url), options);
  } catch (error) {
    return failure(error);
  } finally {
    if (db?.isInitialized) await db.destroy();
  }
}

/** The CLI's commander program; `done` receives each command's outcome (the doc checker parses with it too). */
export function createProgram(done: (outcome: Outcome) => void): Command {
  const program = new Command('typeorm-checkpoint')
    .description('Crash-safe, resumable imports and checkpoint state for TypeORM applications.')
    .version(packageVersion())
    .option('--db <url>', 'database URL: postgres://…, mysql://… or sqlite:path (default: $DATABASE_URL, else sqlite:checkpoint.sqlite)')
    .option('--json', 'print exactly one JSON line on stdout (the result or the error)')
    .option('--no-progress', 'no progress output on stderr')
    .exitOverride()
    // Usage errors are printed by runCli, with their code (and as JSON with --json).
    .configureOutput({ outputError: () => {} });

  program
    .command('import')
    .description('import <file> into a batch in chunks; digest-guarded and resumable (Ctrl-C stops after the current chunk)')
    .argument('<file>', 'a JSON array, NDJSON or CSV (id,value) file')
    .requiredOption('--batch <id>', 'the import batch id')
    .addOption(new Option('--format <format>', 'input format (default: from the file extension)').choices(['json', 'ndjson', 'csv']))
    .option('--size <n>', 'rows per chunk, one transaction each (default 1000)', positiveInteger)
    .option('--replace', 'if the batch was started with another file: delete its rows and import this file from the start')
    .option('--into <table>', 'records mode: import the records into this table (columns from the database catalogue)')
    .option(
      '--key <fields>',
      "identity fields (comma-separated); a repeated key is an invalid row (default: the table's primary key)",
      names,
    )
    .option('--no-key', 'do not check the file for repeated keys')
    .addOption(
      new Option('--conflict <mode>', 'a row whose key exists in the table: fail, keep the old row, or overwrite it').choices([
        'error',
        'skip',
        'update',
      ]),
    )
    .option('--skip-invalid', 'record invalid rows as rejects and leave them out, instead of rejecting the file')
    .option('--max-invalid <n>', 'with --skip-invalid: more invalid rows than this rejects the file', nonNegativeInteger)
    .option('--delimiter <c>', 'CSV field delimiter (default ","; \\t for a tab)', oneCharacter)
    .option('--columns <names>', 'CSV column names (comma-separated) for a file without a header row', names)
    .option(
      '--null <text>',
      'a text read as NULL, in CSV (quoted or not) and JSON strings; repeatable (default: an empty unquoted CSV field)',
      collect,
      [],
    )
    .option('--create', 'create the --into table when it does not exist, its column types inferred from the file (primary key: --key)')
    .option('--check', 'validate the whole file and list its invalid rows; write nothing')
    .action(async (file: string, options: ImportCommandOptions, command: Command) => {
      done(
        await execute(command, true, (db, _database, global) =>
          importCommand(db, file, options, progressMode(process.stderr, global.progress)),
        ),
      );
    });

  program
    .command('rejects')
    .description('the invalid rows a records import with --skip-invalid left out (index, reason, raw)')
    .argument('<batch>', 'import batch')
    .option('--limit <n>', 'rows to show at most (default 100)', positiveInteger)
    .action(async (batch: string, options: { limit?: number }, command: Command) => {
      done(await execute(command, true, (db) => rejectsCommand(db, batch, options.limit)));
    });

  program
    .command('status')
    .description('a job, step or import batch by name; without a name, an overview')
    .argument('[name]', 'job, step or import batch')
    .action(async (name: string | undefined, _options: unknown, command: Command) => {
      done(await execute(command, true, (db, database) => statusCommand(db, name, database)));
    });

  program
    .command('list')
    .description('every job, step and import batch')
    .action(async (_options: unknown, command: Command) => {
      done(await execute(command, true, (db) => listCommand(db)));
    });

  program
    .command('reset')
    .description("forget a job or step (a partitioned job with its ranges), or delete an import batch's checkpoint and imported rows")
    .argument('<name>', 'job, step or import batch')
    .action(async (name: string, _options: unknown, command: Command) => {
      done(await execute(command, true, (db) => resetCommand(db, name)));
    });

  for (const [operation, description] of [
    ['pause', 'pause a batch or partitioned job or an import batch: its loops stop after the batch in flight'],
    ['resume', 'resume a paused job or import batch'],
    ['cancel', 'cancel a job or import batch for good (until reset): its loops stop after the batch in flight'],
  ] as const) {
    program
      .command(operation)
      .description(description)
      .argument('<name>', 'job or import batch')
      .action(async (name: string, _options: unknown, command: Command) => {
        done(await execute(command, true, (db) => controlCommand(db, operation, name)));
      });
  }

  program
    .command('retry-dead')
    .description("make a partitioned job's dead ranges claimable again, each with a fresh attempt budget")
    .argument('<name>', 'partitioned job')
    .action(async (name: string, _options: unknown, command: Command) => {
      done(await execute(command, true, (db) => retryDeadCommand(db, name)));
    });

  const files = program
    .command('files')
    .description('file claims summary: pending, processing, completed, failed, cancelled, dead letters, totals, paused types')
    .action(async (_options: unknown, command: Command) => {
      done(await execute(command, true, (db) => filesCommand(db)));
    });
  for (const [operation, description] of [
    ['pause', 'pause a file type (default: every type): workers claim no file of it; files in flight finish'],
    ['resume', 'resume a paused file type (default: every paused type)'],
  ] as const) {
    files
      .command(operation)
      .description(description)
      .option('--type <type>', 'the file type (default: every type)')
      .action(async (options: { type?: string }, command: Command) => {
        done(await execute(command, true, (db) => filesControlCommand(db, operation, { fileType: options.type })));
      });
  }
  files
    .command('cancel')
    .description("cancel a file: never claimed again until requeued; a running handler's signal aborts")
    .argument('<url>', 'the file URL')
    .action(async (fileUrl: string, _options: unknown, command: Command) => {
      done(await execute(command, true, (db) => filesControlCommand(db, 'cancel', { fileUrl })));
    });

  program
    .command('dashboard')
    .description('serve the web dashboard (binds 127.0.0.1 by default: it has no authentication of its own)')
    .option('--port <n>', 'TCP port (0: any free port)', portNumber, 4000)
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--read-only', 'no actions (requeue, reset): pages only')
    .action(async (options: { port: number; host: string; readOnly?: boolean }, command: Command) => {
      done(await execute(command, true, (db, _database, global) => dashboardCommand(db, options, global.json === true)));
    });

  program
    .command('prune')
    .description('delete the records of finished or cancelled jobs and imports and of completed or cancelled files, older than a duration')
    .requiredOption('--older-than <duration>', 'what ended longer ago than this: 30d, 12h, 90m, 45s, 500ms', parseDuration)
    .option(
      '--kinds <kinds>',
      `what to prune, comma-separated (default ${DEFAULT_PRUNE_KINDS.join(',')}; steps only when named)`,
      parseKinds,
    )
    .option('--dry-run', 'count what would be deleted; delete nothing')
    .action(async (options: PruneCommandOptions, command: Command) => {
      done(await execute(command, true, (db) => pruneCommand(db, options)));
    });

  program
    .command('migrate')
    .description('create or update the checkpoint tables (other commands also do this on first use)')
    .action(async (_options: unknown, command: Command) => {
      done(await execute(command, false, (db, database) => migrateCommand(db, database)));
    });

  return program;
}

function wantsJson(argv: string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).includes('--json');
}

/** Parses `argv` (without node and script), runs the command, prints its outcome; returns the exit code. */
export async function runCli(argv: string[]): Promise<number> {
  let outcome: Outcome | undefined;
  const program = createProgram((result) => (outcome = result));
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end here too, with exit code 0.
      if (error.exitCode === 0) return EXIT_OK;
      const message = error.code === 'commander.help' ? 'a command is required.' : error.message.replace(/^error: /, '');
      outcome = failure(new InvalidArgumentError(message), 'Run typeorm-checkpoint --help for usage.');
    } else {
      outcome = failure(error);
    }
  }
  if (outcome === undefined) return EXIT_OK;
  printOutcome(outcome, wantsJson(argv));
  return outcome.exitCode;
}

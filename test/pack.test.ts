import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, sep } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { createTestDatabase, DRIVER, type TestDatabase } from './support/database';

const run = promisify(execFile);

const ROOT = join(__dirname, '..');
/** Not part of a fresh checkout: the build output, installed modules, local databases and packs. */
const NOT_CHECKED_OUT = new Set(['node_modules', '.git', 'dist', '.tmp']);

/** Peers the package expects the application to have; linked from this repo's node_modules, never downloaded. */
const PEERS = [
  'typeorm',
  'reflect-metadata',
  'better-sqlite3',
  'sqlite3',
  'pg',
  'mysql2',
  '@nestjs/common',
  '@nestjs/core',
  '@nestjs/typeorm',
  '@types/node',
];

/** How an application uses the package from plain CommonJS JavaScript. */
const CONSUMER_JS = String.raw`'use strict';
require('reflect-metadata');
const path = require('node:path');
const checkpoint = require('typeorm-checkpoint');
const nestLoaded = Object.keys(require.cache).filter((file) => file.includes(path.sep + '@nestjs' + path.sep));
const { DataSource } = require('typeorm');

async function main() {
  const dataSource = new DataSource({
    ...checkpoint.dataSourceOptionsFromUrl(process.env.DATABASE_URL),
    entities: checkpoint.checkpointEntities,
    migrations: checkpoint.checkpointMigrations,
  });
  await dataSource.initialize();
  await dataSource.runMigrations();
  let runs = 0;
  const first = await checkpoint.step(dataSource, 'pack:step', async () => ++runs);
  const second = await checkpoint.step(dataSource, 'pack:step', async () => ++runs);
  const numbers = [1, 2, 3, 4, 5];
  const seen = [];
  const source = (cursor, limit) => {
    const from = cursor === null ? 0 : cursor;
    const items = numbers.slice(from, from + limit);
    return { items, next: from + items.length < numbers.length ? from + items.length : null };
  };
  const batch = await checkpoint.eachBatch(dataSource, 'pack:batch', source, 2, (items) => { seen.push(...items); });
  let error = null;
  try {
    await checkpoint.eachBatch(dataSource, 'pack:bad', source, 0, () => undefined);
  } catch (caught) {
    error = caught;
  }
  const status = await checkpoint.status(dataSource, 'pack:batch');
  await dataSource.destroy();
  const nest = require('typeorm-checkpoint/nestjs');
  console.log(JSON.stringify({
    nestLoaded,
    first, second, runs, batch, seen,
    status: { kind: status.kind, done: status.done, batches: status.batches, items: status.items },
    errorCode: error && error.code,
    isCheckpointError: error instanceof checkpoint.CheckpointError,
    nestModule: typeof nest.CheckpointModule.forRoot,
    nestService: typeof nest.CheckpointService,
    version: require('typeorm-checkpoint/package.json').version,
  }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;

/** A TypeScript application importing both entry points; the @ts-expect-error lines fail if the types resolve to `any`. */
const CONSUMER_TS = String.raw`import 'reflect-metadata';
import { Injectable, type DynamicModule } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  CheckpointError,
  Checkpointed,
  CheckpointManager,
  checkpointEntities,
  checkpointMigrations,
  eachBatch,
  importFile,
  step,
  type ImportFileResult,
  type Page,
  type Status,
} from 'typeorm-checkpoint';
import { CheckpointModule, CheckpointService, InjectCheckpointService } from 'typeorm-checkpoint/nestjs';

@Injectable()
export class Reports {
  constructor(
    private readonly dataSource: DataSource,
    @InjectCheckpointService('reports') private readonly checkpoints: CheckpointService,
  ) {}

  @Checkpointed()
  async close(month: string): Promise<{ month: string }> {
    return { month };
  }

  async importPrices(path: string): Promise<ImportFileResult> {
    const manager: CheckpointManager = this.checkpoints.createManager({ leaseMs: 1000 });
    void manager;
    return this.checkpoints.importFile('prices', path, { size: 500 });
  }
}

export async function use(dataSource: DataSource): Promise<number> {
  const entities: Function[] = [...checkpointEntities, ...checkpointMigrations];
  const modules: DynamicModule[] = [CheckpointModule.forRoot({ isGlobal: true }), CheckpointModule.forRootAsync({ useFactory: () => ({}) })];
  const answer: number = await step(dataSource, 'answer', () => 42);
  const page: Page<number> = { items: [1], next: null };
  await eachBatch(dataSource, 'numbers', () => page, 10, (items: number[]) => items.length);
  const status: Status | null = null;
  const imported: Promise<ImportFileResult> = importFile(dataSource, 'b', 'data.csv');
  void entities; void modules; void status; void imported;
  // @ts-expect-error limit is a number
  await eachBatch(dataSource, 'numbers', () => page, '10', () => undefined);
  // @ts-expect-error dataSource is the name of a TypeOrmModule data source
  CheckpointModule.forRoot({ dataSource: 1 });
  const error: CheckpointError | null = null;
  return answer + (error === null ? 0 : 1);
}
`;

function tsconfig(moduleResolution: 'nodenext' | 'node10'): string {
  return JSON.stringify({
    compilerOptions: {
      module: moduleResolution === 'nodenext' ? 'nodenext' : 'commonjs',
      moduleResolution,
      target: 'ES2022',
      strict: true,
      noEmit: true,
      // The shipped declarations' own imports are checked by the scan below: a full lib check takes too long.
      skipLibCheck: true,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      types: ['node'],
      // node10 resolution is deprecated in TypeScript 6, yet still what many applications use.
      ignoreDeprecations: '6.0',
    },
    files: ['consumer.ts'],
  });
}

function declarationFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? declarationFiles(join(dir, entry.name)) : entry.name.endsWith('.d.ts') ? [join(dir, entry.name)] : [],
  );
}

/** npm's own child environment would point a nested npm at this repo (npm_config_local_prefix and co.). */
function npmEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('npm_')));
}

describe(`npm pack: the published package works in a fresh project (${DRIVER})`, function () {
  this.timeout(240_000);
  let work: string;
  let app: string;
  let installed: string;
  let db: TestDatabase;

  before(async () => {
    db = await createTestDatabase('pack');
    work = mkdtempSync(join(tmpdir(), 'ck-pack-'));
    // Pack a copy of the checkout (sources only) so a build that relies on files outside git, or
    // on an old dist/, fails here, and this repo's dist/ is left alone.
    const repo = join(work, 'repo');
    cpSync(ROOT, repo, {
      recursive: true,
      filter: (source) => {
        const path = relative(ROOT, source);
        return !NOT_CHECKED_OUT.has(path.split(sep)[0]) && !/\.(tgz|sqlite(-wal|-shm)?)$/.test(path);
      },
    });
    symlinkSync(join(ROOT, 'node_modules'), join(repo, 'node_modules'), 'dir');
    // prepack runs `npm run build`.
    await run('npm', ['pack', '--pack-destination', work], { cwd: repo, env: npmEnv(), maxBuffer: 16 * 1024 * 1024 });
    const tarballs = readdirSync(work).filter((name) => name.endsWith('.tgz'));
    expect(tarballs).to.have.length(1);

    app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
    // The package's own dependencies come from npm's cache (filled by `npm ci`); peers are linked below.
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--legacy-peer-deps', join(work, tarballs[0])], {
      cwd: app,
      env: npmEnv(),
      maxBuffer: 16 * 1024 * 1024,
    });
    for (const peer of PEERS) {
      const from = join(ROOT, 'node_modules', peer);
      const to = join(app, 'node_modules', peer);
      if (!existsSync(from) || existsSync(to)) continue;
      mkdirSync(dirname(to), { recursive: true });
      symlinkSync(from, to, 'dir');
    }
    installed = join(app, 'node_modules', 'typeorm-checkpoint');
  });

  after(async () => {
    if (work) rmSync(work, { recursive: true, force: true });
    await db.drop();
  });

  it('ships main, types, every export target, entities, migrations and an executable bin — and no sources or tests', () => {
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      main: string;
      types: string;
      bin: Record<string, string>;
      exports: Record<string, string | Record<string, string>>;
      dependencies: Record<string, string>;
    };
    const targets = [manifest.main, manifest.types, ...Object.values(manifest.bin)];
    for (const target of Object.values(manifest.exports)) targets.push(...(typeof target === 'string' ? [target] : Object.values(target)));
    for (const target of targets) expect(existsSync(join(installed, target)), target).to.equal(true);
    expect(Object.keys(manifest.exports)).to.include.members(['.', './nestjs', './package.json']);
    for (const folder of ['dist/src', 'dist/entities', 'dist/migrations', 'dist/src/nestjs'])
      expect(existsSync(join(installed, folder)), folder).to.equal(true);
    for (const absent of ['src', 'test', 'dist/test', 'tsconfig.json']) expect(existsSync(join(installed, absent)), absent).to.equal(false);

    const bin = join(installed, manifest.bin['typeorm-checkpoint']);
    expect(readFileSync(bin, 'utf8').startsWith('#!/usr/bin/env node\n')).to.equal(true);
    expect(statSync(bin).mode & 0o111).to.not.equal(0);
    // Runtime dependencies are real dependencies, not dev-only ones.
    expect(manifest.dependencies).to.not.have.any.keys('@nestjs/common', '@nestjs/core', '@nestjs/typeorm', 'typeorm');
  });

  it('works from plain CommonJS: a real step and eachBatch, typed errors, and the main entry never loads NestJS', async () => {
    writeFileSync(join(app, 'consumer.js'), CONSUMER_JS);
    const { stdout } = await run(process.execPath, ['consumer.js'], { cwd: app, env: { ...process.env, DATABASE_URL: db.url } });
    const result = JSON.parse(stdout.trim().split('\n').pop() as string) as Record<string, unknown>;
    expect(result.nestLoaded).to.deep.equal([]);
    expect(result).to.deep.include({ first: 1, second: 1, runs: 1, seen: [1, 2, 3, 4, 5] });
    expect(result.batch).to.deep.equal({ batches: 3, items: 5, done: true, cursor: null });
    expect(result.status).to.deep.equal({ kind: 'batch', done: true, batches: 3, items: 5 });
    expect(result).to.deep.include({ errorCode: 'INVALID_ARGUMENT', isCheckpointError: true });
    expect(result).to.deep.include({
      nestModule: 'function',
      nestService: 'function',
      version: JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version,
    });
  });

  it('installs a working typeorm-checkpoint command', async () => {
    const bin = join(app, 'node_modules', '.bin', 'typeorm-checkpoint');
    expect(basename(bin)).to.equal('typeorm-checkpoint');
    // Executed directly, not through node: the shebang and the executable bit are what run it.
    const { stdout } = await run(bin, ['status', 'pack:batch', '--json', '--db', db.url], { cwd: app });
    const result = JSON.parse(stdout.trim()) as { ok: boolean; command: string; found: boolean; job: { done: boolean } | null };
    expect(result).to.include({ ok: true, command: 'status', found: true });
    expect(result.job).to.include({ done: true });
  });

  it('type-checks a TypeScript application importing typeorm-checkpoint and typeorm-checkpoint/nestjs', async () => {
    writeFileSync(join(app, 'consumer.ts'), CONSUMER_TS);
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    // nodenext resolves through "exports"; node10 ignores "exports", so the subpath needs "typesVersions".
    for (const moduleResolution of ['nodenext', 'node10'] as const) {
      writeFileSync(join(app, 'tsconfig.json'), tsconfig(moduleResolution));
      await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app }).catch((error: { stdout?: string }) => {
        throw new Error(`tsc (${moduleResolution}) failed:\n${error.stdout ?? String(error)}`);
      });
    }
  });

  it('ships declarations that import only peers, typed dependencies and Node', () => {
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
    };
    const dependencies = Object.keys(manifest.dependencies ?? {});
    const allowed = new Set([...Object.keys(manifest.peerDependencies ?? {}), 'node', ...builtinModules]);
    // A dependency whose types live in a dev-only @types package would leave consumers without them.
    for (const dependency of dependencies) {
      const own = JSON.parse(readFileSync(join(app, 'node_modules', dependency, 'package.json'), 'utf8')) as Record<string, unknown>;
      if (own.types !== undefined || own.typings !== undefined || dependencies.includes(`@types/${dependency}`)) allowed.add(dependency);
    }
    const imported = new Set<string>();
    for (const file of declarationFiles(join(installed, 'dist'))) {
      const text = readFileSync(file, 'utf8');
      for (const match of text.matchAll(/(?:from\s+|import\(\s*|require\(\s*|<reference types=)["']([^"'.][^"']*)["']/g)) {
        const specifier = match[1].replace(/^node:/, '');
        imported.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]);
      }
    }
    expect(imported).to.include('typeorm');
    expect([...imported].filter((name) => !allowed.has(name))).to.deep.equal([]);
  });
});

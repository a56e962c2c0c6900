import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Injectable, Module, type ModuleMetadata } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { getDataSourceToken, getRepositoryToken, TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { expect } from 'chai';
import { DataSource, Repository } from 'typeorm';
import {
  CheckpointError,
  Checkpointed,
  CheckpointJob,
  checkpointMigrations,
  currentManager,
  dataSourceOptionsFromUrl,
  FileCheckpoint,
  getDefaultDataSource,
  ImportItem,
  ImportJob,
  checkpointEntities,
  InvalidArgumentError,
} from '../src';
import {
  CheckpointModule,
  type CheckpointOptionsFactory,
  CheckpointService,
  type CheckpointServiceOptions,
  InjectCheckpointService,
} from '../src/nestjs';
import { count, sql, useTestDatabase } from './support/database';
import { rejection } from './support/expect-code';
import { createStepEffectsTable, effectsLabelled, StepEffect } from './fixtures/step-effect';

/** What a Nest application's TypeOrmModule.forRoot looks like with the package (as the README shows). */
function typeOrmOptions(url: string, extra: Partial<TypeOrmModuleOptions> = {}): TypeOrmModuleOptions {
  return {
    ...dataSourceOptionsFromUrl(url),
    migrations: checkpointMigrations,
    migrationsRun: true,
    retryAttempts: 0,
    ...extra,
  } as TypeOrmModuleOptions;
}

/** A typical Nest provider: TypeORM's DataSource injected into a private constructor property. */
@Injectable()
class BillingService {
  calls = 0;

  constructor(private readonly dataSource: DataSource) {}

  @Checkpointed()
  async charge(customer: string): Promise<{ customer: string; effects: number }> {
    this.calls += 1;
    await currentManager()
      .getRepository(StepEffect)
      .insert({ id: randomUUID(), label: `charge ${customer}` });
    // The write above is visible in the step's transaction, not through the private DataSource outside it.
    return {
      customer,
      effects: await currentManager()
        .getRepository(StepEffect)
        .countBy({ label: `charge ${customer}` }),
    };
  }

  hasOwnDataSource(): boolean {
    return this.dataSource instanceof DataSource;
  }
}

/** A provider without any DataSource property: only the module's setDefaultDataSource lets it run. */
@Injectable()
class ReportService {
  @Checkpointed({ name: (month: string) => `report:${month}` })
  async close(month: string): Promise<string> {
    await currentManager()
      .getRepository(StepEffect)
      .insert({ id: randomUUID(), label: `report ${month}` });
    return `closed ${month}`;
  }
}

@Injectable()
class ConfigService {
  readonly workerId = 'nest-config-worker';
}

@Module({ providers: [ConfigService], exports: [ConfigService] })
class ConfigModule {}

@Injectable()
class ReportsCheckpointOptions implements CheckpointOptionsFactory {
  createCheckpointOptions(): CheckpointServiceOptions {
    return { manager: { workerId: 'reports-worker', maxRetries: 1 } };
  }
}

@Injectable()
class ReportsConsumer {
  constructor(@InjectCheckpointService('reports') readonly checkpoints: CheckpointService) {}
}

describe(`NestJS: CheckpointModule (${process.env.DB ?? 'sqlite'})`, () => {
  const db = useTestDatabase('nestjs', { entities: [StepEffect] });
  let dir: string;
  const apps: TestingModule[] = [];

  async function boot(metadata: ModuleMetadata): Promise<TestingModule> {
    const app = await Test.createTestingModule(metadata).compile();
    apps.push(app);
    await app.init();
    return app;
  }

  before(async () => {
    await createStepEffectsTable(db.ds);
    dir = mkdtempSync(join(tmpdir(), 'ck-nest-'));
  });

  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });

  after(async () => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers the checkpoint entities with autoLoadEntities and exports their repositories', async () => {
    const app = await boot({
      imports: [
        TypeOrmModule.forRoot(typeOrmOptions(db.url, { entities: [StepEffect], autoLoadEntities: true })),
        CheckpointModule.forRoot(),
      ],
    });
    const dataSource = app.get(DataSource);
    for (const entity of [CheckpointJob, ImportJob, ImportItem, FileCheckpoint])
      expect(dataSource.hasMetadata(entity), entity.name).to.equal(true);
    expect(app.get(getRepositoryToken(FileCheckpoint))).to.be.instanceOf(Repository);
    const service = app.get(CheckpointService);
    expect(service).to.be.instanceOf(CheckpointService);
    expect(service.dataSource).to.equal(dataSource);
    // The repository helper needs the entity metadata the module registered.
    expect(await service.repository().count()).to.be.a('number');
  });

  it('CheckpointService runs steps, batches, status, list and reset on the injected DataSource', async () => {
    const app = await boot({
      imports: [
        TypeOrmModule.forRoot(typeOrmOptions(db.url, { entities: [StepEffect], autoLoadEntities: true })),
        CheckpointModule.forRoot(),
      ],
    });
    const service = app.get(CheckpointService);
    let runs = 0;
    const once = () =>
      service.step('nest:step', async (tx) => {
        runs += 1;
        await tx.getRepository(StepEffect).insert({ id: randomUUID(), label: 'nest step' });
        return { runs };
      });
    expect(await once()).to.deep.equal({ runs: 1 });
    expect(await once()).to.deep.equal({ runs: 1 });
    expect(runs).to.equal(1);
    expect(await effectsLabelled(db.ds, 'nest step')).to.equal(1);

    await db.ds.getRepository(StepEffect).insert(Array.from({ length: 7 }, (_, i) => ({ id: `nest-batch-${i}`, label: 'batch source' })));
    const source = await service.sqlSource('step_effects', 'id', { where: 'label = :label', parameters: { label: 'batch source' } });
    const seen: string[] = [];
    const result = await service.eachBatch('nest:batch', source, 3, async (items, tx) => {
      seen.push(...items.map((item) => String(item.id)));
      await tx.getRepository(StepEffect).insert(items.map((item) => ({ id: randomUUID(), label: `copied ${String(item.id)}` })));
    });
    expect(result).to.include({ batches: 3, items: 7, done: true });
    expect(seen).to.have.length(7);
    expect(await count(db.ds, sql("SELECT COUNT(*) AS n FROM step_effects WHERE label LIKE 'copied %'"))).to.equal(7);

    expect(await service.status('nest:batch')).to.include({ kind: 'batch', done: true, batches: 3, items: 7 });

    const ranged = await service.eachPartition(
      'nest:ranges',
      source,
      2,
      async (items, tx) => {
        await tx.getRepository(StepEffect).insert(items.map((item) => ({ id: randomUUID(), label: `ranged ${String(item.id)}` })));
      },
      { partitions: 3 },
    );
    expect(ranged).to.include({ items: 7, partitions: 3, done: true });
    expect(await count(db.ds, sql("SELECT COUNT(*) AS n FROM step_effects WHERE label LIKE 'ranged %'"))).to.equal(7);
    expect((await service.listPartitions('nest:ranges')).map((range) => range.status)).to.deep.equal(['done', 'done', 'done']);
    expect(await service.retryDead('nest:ranges')).to.equal(0);
    expect(await service.reset('nest:ranges')).to.equal(true);
    expect((await service.list({ prefix: 'nest:' })).map((s) => s.name)).to.deep.equal(['nest:batch', 'nest:step']);
    expect(await service.reset('nest:step')).to.equal(true);
    expect(await service.status('nest:step')).to.equal(null);
  });

  it('CheckpointService imports files and makes fenced claim managers with the module defaults', async () => {
    const app = await boot({
      imports: [
        TypeOrmModule.forRoot(typeOrmOptions(db.url, { entities: [StepEffect], autoLoadEntities: true })),
        CheckpointModule.forRoot({ manager: { workerId: 'nest-worker', leaseMs: 60_000 } }),
      ],
    });
    const service = app.get(CheckpointService);
    const file = join(dir, 'scores.ndjson');
    writeFileSync(file, ['{"id":"a","value":1}', '{"id":"b","value":2}', '{"id":"c","value":3}'].join('\n'));
    expect(await service.importFile('nest-import', file, { size: 2 })).to.include({ nextIndex: 3, rows: 3, done: true });
    expect(await service.values('nest-import')).to.deep.equal([
      ['a', 1],
      ['b', 2],
      ['c', 3],
    ]);
    expect(await service.checkpoint('nest-import')).to.equal(3);

    const first = service.createManager();
    const second = service.createManager({ workerId: 'nest-worker-2' });
    expect(first.getWorkerId()).to.equal('nest-worker');
    expect(second.getWorkerId()).to.equal('nest-worker-2');
    const url = 's3://bucket/nest/file-1.csv';
    expect(await first.claimFile(url, 'csv', new Date(0))).to.equal(true);
    expect(await second.claimFile(url, 'csv', new Date(0))).to.equal(false);
    await first.completeFile(url, { totalRows: 3, filteredRows: 0, persistedRows: 3, durationMs: 5 });
    expect(await second.isProcessed(url)).to.equal(true);
    expect(await app.get<Repository<FileCheckpoint>>(getRepositoryToken(FileCheckpoint)).countBy({ status: 'completed' })).to.equal(1);
  });

  it('@Checkpointed on a Nest provider finds the DataSource in its private constructor property', async () => {
    expect(getDefaultDataSource()).to.equal(null);
    const app = await boot({
      imports: [
        TypeOrmModule.forRoot(typeOrmOptions(db.url, { entities: [StepEffect], autoLoadEntities: true })),
        CheckpointModule.forRoot(),
      ],
      providers: [BillingService],
    });
    const billing = app.get(BillingService);
    expect(billing.hasOwnDataSource()).to.equal(true);
    expect(await billing.charge('c1')).to.deep.equal({ customer: 'c1', effects: 1 });
    expect(await billing.charge('c1')).to.deep.equal({ customer: 'c1', effects: 1 });
    expect(billing.calls).to.equal(1);
    expect(await effectsLabelled(db.ds, 'charge c1')).to.equal(1);
    const service = app.get(CheckpointService);
    expect(await service.status('BillingService.charge("c1")')).to.include({ kind: 'step', done: true });

    // Inside the service's transaction the step joins it, and rolls back with it.
    const marker = new Error('caller rolls back');
    expect(
      await rejection(
        service.runInTransaction(async () => {
          await billing.charge('c2');
          throw marker;
        }),
      ),
    ).to.equal(marker);
    expect(await service.status('BillingService.charge("c2")')).to.equal(null);
    expect(await effectsLabelled(db.ds, 'charge c2')).to.equal(0);
  });

  it('forRootAsync (useFactory) can make the DataSource the default for providers without one, until the module closes', async () => {
    const app = await boot({
      imports: [
        TypeOrmModule.forRoot(typeOrmOptions(db.url, { entities: [StepEffect, ...checkpointEntities] })),
        CheckpointModule.forRootAsync({
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (config: ConfigService) => ({ setDefaultDataSource: true, manager: { workerId: config.workerId } }),
        }),
      ],
      providers: [ReportService],
    });
    const dataSource = app.get(DataSource);
    expect(getDefaultDataSource()).to.equal(dataSource);
    expect(app.get(CheckpointService).createManager().getWorkerId()).to.equal('nest-config-worker');
    const reports = app.get(ReportService);
    expect(await reports.close('2026-05')).to.equal('closed 2026-05');
    expect(await reports.close('2026-05')).to.equal('closed 2026-05');
    expect(await effectsLabelled(db.ds, 'report 2026-05')).to.equal(1);
    await app.close();
    apps.splice(apps.indexOf(app), 1);
    expect(getDefaultDataSource()).to.equal(null);
  });

  it('binds to a named data source (forRootAsync with useClass, explicit entities) and injects by name', async () => {
    const app = await boot({
      imports: [
        TypeOrmModule.forRoot(typeOrmOptions(db.url, { entities: [StepEffect, ...checkpointEntities] })),
        TypeOrmModule.forRoot(typeOrmOptions(db.url, { name: 'reports', entities: checkpointEntities })),
        CheckpointModule.forRoot(),
        CheckpointModule.forRootAsync({ dataSource: 'reports', useClass: ReportsCheckpointOptions }),
      ],
      providers: [ReportsConsumer],
    });
    const named = app.get<DataSource>(getDataSourceToken('reports'));
    const consumer = app.get(ReportsConsumer);
    expect(consumer.checkpoints.dataSource).to.equal(named);
    expect(app.get(CheckpointService).dataSource).to.equal(app.get(DataSource));
    expect(consumer.checkpoints.dataSource).to.not.equal(app.get(DataSource));
    expect(consumer.checkpoints.createManager().getWorkerId()).to.equal('reports-worker');
    expect(await consumer.checkpoints.step('nest:named', () => 'named')).to.equal('named');
    expect(await app.get(CheckpointService).status('nest:named')).to.include({ kind: 'step', done: true });
  });

  it('forRootAsync without a factory is INVALID_ARGUMENT', () => {
    let thrown: unknown;
    try {
      CheckpointModule.forRootAsync({ dataSource: 'x' });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).to.be.instanceOf(CheckpointError);
    expect(thrown).to.be.instanceOf(InvalidArgumentError);
    expect((thrown as CheckpointError).code).to.equal('INVALID_ARGUMENT');
  });
});

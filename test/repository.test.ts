import { expect } from 'chai';
import { DataSource, type EntityManager, Repository } from 'typeorm';
import {
  CheckpointError,
  CheckpointJob,
  currentManager,
  dataSourceOptionsFromUrl,
  getCheckpointRepository,
  type Json,
  type Page,
  runInTransaction,
  sqlSource,
  status,
} from '../src';
import { DRIVER, useTestDatabase } from './support/database';
import { rejection } from './support/expect-code';
import { createStepEffectsTable, effectsLabelled, StepEffect, writeEffect } from './fixtures/step-effect';

/** Three pages of numbers: [1, 2], [3, 4], [5]. */
function numbers(cursor: unknown, limit: number): Page<number> {
  const start = typeof cursor === 'number' ? cursor : 0;
  const items = [1, 2, 3, 4, 5].filter((n) => n > start).slice(0, limit);
  return { items, next: start + items.length >= 5 ? null : start + items.length };
}

describe(`getCheckpointRepository (${DRIVER})`, () => {
  const db = useTestDatabase('repository', { entities: [StepEffect] });
  before(() => createStepEffectsTable(db.ds));

  /** A step body that writes one effect labelled `label` and returns `value`. */
  function writing<T extends Json>(label: string, value: T) {
    return async (tx: EntityManager): Promise<T> => {
      await writeEffect(tx, label);
      return value;
    };
  }

  const effects = (label: string) => effectsLabelled(db.ds, label);

  it('is TypeORM’s Repository<CheckpointJob>, with the functions bound to a DataSource', async () => {
    const repository = getCheckpointRepository(db.ds);
    expect(repository).to.be.instanceOf(Repository);
    expect(repository.target).to.equal(CheckpointJob);

    let calls = 0;
    const f = async (tx: EntityManager) => {
      calls += 1;
      expect(currentManager()).to.equal(tx);
      await writeEffect(tx, 'repo step');
      return { ok: true };
    };
    expect(await repository.step('repo step', f)).to.deep.equal({ ok: true });
    expect(await repository.step('repo step', f)).to.deep.equal({ ok: true });
    expect(calls).to.equal(1);
    expect(await effects('repo step')).to.equal(1);

    const seen: number[] = [];
    const result = await repository.eachBatch('repo batch', numbers, 2, async (items, tx) => {
      seen.push(...items);
      for (const item of items) await writeEffect(tx, `repo batch ${item}`);
    });
    expect(result).to.deep.equal({ batches: 3, items: 5, done: true, cursor: null });
    expect(seen).to.deep.equal([1, 2, 3, 4, 5]);

    expect(await repository.status('repo step')).to.include({ kind: 'step', done: true });
    expect((await repository.status('repo step'))?.value).to.deep.equal({ ok: true });
    expect(await repository.status('repo batch')).to.include({ kind: 'batch', done: true, batches: 3, items: 5 });
    expect((await repository.list({ kind: 'step', prefix: 'repo ' })).map((s) => s.name)).to.deep.equal(['repo step']);
    expect((await repository.list({ prefix: 'repo ' })).map((s) => s.name)).to.deep.equal(['repo batch', 'repo step']);
    expect((await repository.list()).length).to.be.at.least(2);

    await db.ds.query('CREATE TABLE repo_numbers (n integer PRIMARY KEY)');
    await db.ds.query('INSERT INTO repo_numbers (n) VALUES (1), (2), (3), (4), (5)');
    const ranged: number[] = [];
    const partitioned = await repository.eachPartition(
      'repo ranges',
      await sqlSource(db.ds, 'repo_numbers', 'n'),
      2,
      (items) => {
        ranged.push(...items.map((item) => Number(item.n)));
      },
      { partitions: 2 },
    );
    expect(partitioned).to.deep.equal({ batches: 3, items: 5, partitions: 2, done: true });
    expect(ranged.sort()).to.deep.equal([1, 2, 3, 4, 5]);
    expect((await repository.listPartitions('repo ranges')).map((range) => range.items)).to.deep.equal([3, 2]);
    expect(await repository.retryDead('repo ranges')).to.equal(0);
    expect(await repository.status('repo ranges')).to.include({ kind: 'partitioned', done: true, items: 5 });

    // Plain repository methods read the same table.
    const entity = await repository.findOneBy({ name: 'repo step' });
    expect(entity).to.include({ name: 'repo step', kind: 'step' });
    expect(await repository.countBy({ kind: 'batch' })).to.be.at.least(1);

    expect(await repository.reset('repo step')).to.equal(true);
    expect(await repository.reset('repo step')).to.equal(false);
    expect(await repository.status('repo step')).to.equal(null);
    expect(await repository.step('repo step', f)).to.deep.equal({ ok: true });
    expect(calls).to.equal(2);
  });

  it('from a transaction’s manager joins that transaction: the caller’s rollback erases the step and the job', async () => {
    const failure = new Error('caller rolls back');
    const error = await rejection(
      runInTransaction(db.ds, async (tx) => {
        const repository = getCheckpointRepository(tx);
        expect(repository.manager).to.equal(tx);
        expect(await repository.step('joined step', writing('joined step', 'v'))).to.equal('v');
        expect(
          await repository.eachBatch('joined batch', numbers, 5, async (items, inner) => writeEffect(inner, `joined ${items.length}`)),
        ).to.include({ done: true });
        expect(await repository.status('joined step')).to.include({ done: true });
        expect((await repository.list({ prefix: 'joined ' })).length).to.equal(2);
        throw failure;
      }),
    );
    expect(error).to.equal(failure);
    expect(await status(db.ds, 'joined step')).to.equal(null);
    expect(await status(db.ds, 'joined batch')).to.equal(null);
    expect(await effects('joined step')).to.equal(0);
    expect(await effects('joined 5')).to.equal(0);
  });

  it('joins a plain TypeORM transaction too, and commits with it', async () => {
    await db.ds.transaction(async (tx) => {
      const repository = getCheckpointRepository(tx);
      expect(await repository.step('typeorm tx step', writing('typeorm tx', 1))).to.equal(1);
      await writeEffect(tx, 'typeorm tx caller');
    });
    expect((await status(db.ds, 'typeorm tx step'))?.value).to.equal(1);
    expect(await effects('typeorm tx')).to.equal(1);

    const failure = new Error('rolled back');
    expect(
      await rejection(
        db.ds.transaction(async (tx) => {
          await getCheckpointRepository(tx).step('typeorm tx rolled back', () => 2);
          expect(await getCheckpointRepository(tx).reset('typeorm tx step')).to.equal(true);
          throw failure;
        }),
      ),
    ).to.equal(failure);
    expect(await status(db.ds, 'typeorm tx rolled back')).to.equal(null);
    expect((await status(db.ds, 'typeorm tx step'))?.value).to.equal(1);
  });

  it('re-bound with manager.withRepository, uses the new manager', async () => {
    const repository = getCheckpointRepository(db.ds);
    const failure = new Error('rolled back');
    const error = await rejection(
      db.ds.transaction(async (tx) => {
        const bound = tx.withRepository(repository);
        expect(await bound.step('rebound step', () => 'x')).to.equal('x');
        throw failure;
      }),
    );
    expect(error).to.equal(failure);
    expect(await status(db.ds, 'rebound step')).to.equal(null);
  });

  it('refuses a DataSource without the checkpoint entities with INVALID_ARGUMENT', async () => {
    const bare = new DataSource({ ...dataSourceOptionsFromUrl(db.url), entities: [] });
    await bare.initialize();
    try {
      let error: unknown;
      try {
        getCheckpointRepository(bare);
      } catch (caught) {
        error = caught;
      }
      expect(error).to.be.instanceOf(CheckpointError);
      expect((error as CheckpointError).code).to.equal('INVALID_ARGUMENT');
    } finally {
      await bare.destroy();
    }
  });
});

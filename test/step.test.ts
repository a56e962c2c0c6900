import { expect } from 'chai';
import type { EntityManager } from 'typeorm';
import { currentManager, type Json, runInTransaction, status, step } from '../src';
import { kill, startChild } from './support/child';
import { count, DRIVER, LOCK_POLL_MS, rowLockWaiters, sql, useTestDatabase } from './support/database';
import { expectCode, rejection } from './support/expect-code';
import { createStepEffectsTable, effectsLabelled, StepEffect, writeEffect } from './fixtures/step-effect';

const WORKER = 'test/fixtures/step-worker.ts';

describe(`step (${DRIVER})`, () => {
  const db = useTestDatabase('step', { entities: [StepEffect] });
  before(() => createStepEffectsTable(db.ds));

  /** A step body that writes one effect labelled `label` and returns the label. */
  function writing(label: string) {
    return async (tx: EntityManager): Promise<string> => {
      await writeEffect(tx, label);
      return label;
    };
  }

  const effects = (label: string) => effectsLabelled(db.ds, label);

  describe('the contract', () => {
    it('records the first result together with f’s writes, inside f’s transaction', async () => {
      let seenTx: EntityManager | undefined;
      const value = await step(db.ds, 'first', async (tx) => {
        seenTx = tx;
        expect(tx.queryRunner?.isTransactionActive).to.equal(true);
        expect(currentManager()).to.equal(tx);
        expect(currentManager(db.ds)).to.equal(tx);
        await writeEffect(tx, 'first');
        return { total: 3, tags: ['a'] };
      });
      expect(seenTx).to.not.equal(undefined);
      expect(value).to.deep.equal({ total: 3, tags: ['a'] });
      expect(await effects('first')).to.equal(1);
      const stored = await status(db.ds, 'first');
      expect(stored).to.include({ name: 'first', kind: 'step', done: true });
      expect(stored?.value).to.deep.equal({ total: 3, tags: ['a'] });
      expect(stored?.finishedAt).to.be.a('number');
    });

    it('returns the stored value on later calls without calling f', async () => {
      let calls = 0;
      const f = async (tx: EntityManager): Promise<Json> => {
        calls += 1;
        await writeEffect(tx, 'memo');
        return { call: calls };
      };
      expect(await step(db.ds, 'memo', f)).to.deep.equal({ call: 1 });
      expect(await step(db.ds, 'memo', f)).to.deep.equal({ call: 1 });
      expect(await step(db.ds, 'memo', () => ({ other: true }))).to.deep.equal({ call: 1 });
      expect(calls).to.equal(1);
      expect(await effects('memo')).to.equal(1);
    });

    it('records nothing when f throws, rolls its writes back and re-raises the same error', async () => {
      const failure = new Error('boom');
      const error = await rejection(
        step(db.ds, 'throws', async (tx) => {
          await writeEffect(tx, 'throws');
          throw failure;
        }),
      );
      expect(error).to.equal(failure);
      expect(await status(db.ds, 'throws')).to.equal(null);
      expect(await effects('throws')).to.equal(0);

      const value = await step(db.ds, 'throws', async (tx) => {
        await writeEffect(tx, 'throws');
        return 'second try';
      });
      expect(value).to.equal('second try');
      expect(await effects('throws')).to.equal(1);
    });

    it('returns the decoded form, a fresh copy on the first and on every later call', async () => {
      const returned = { list: [1, { deep: 'x' }], n: 1.5 };
      const first = await step(db.ds, 'fresh', () => returned);
      expect(first).to.deep.equal(returned);
      expect(first).to.not.equal(returned);
      (first as { list: unknown[] }).list.push('mutated');
      (first as { n: number }).n = 99;
      const second = await step<Json>(db.ds, 'fresh', () => 'unused');
      expect(second).to.deep.equal({ list: [1, { deep: 'x' }], n: 1.5 });
      (second as { list: unknown[] }).list.length = 0;
      expect(await step(db.ds, 'fresh', () => 'unused')).to.deep.equal({ list: [1, { deep: 'x' }], n: 1.5 });
    });

    it('keeps JSON values exactly, including strings with U+0000 and nested nulls', async () => {
      const value = { text: 'a\u0000b\u{1F600}', nothing: null, flags: [true, false], big: 2 ** 53 - 1, tiny: 5e-324 };
      expect(await step(db.ds, 'exact', () => value)).to.deep.equal(value);
      expect(await step(db.ds, 'exact', () => null)).to.deep.equal(value);
      expect(await step(db.ds, 'null result', () => null)).to.equal(null);
      expect(await step(db.ds, 'null result', () => 1)).to.equal(null);
    });
  });

  describe('refusing results that are not JSON', () => {
    class Point {
      x = 1;
    }
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const sparse: number[] = [1];
    sparse[2] = 3;
    const cases: [string, () => unknown][] = [
      ['undefined', () => undefined],
      ['a function', () => () => 1],
      ['a symbol', () => Symbol('s')],
      ['a bigint', () => BigInt(1)],
      ['NaN', () => NaN],
      ['Infinity', () => Infinity],
      ['-Infinity', () => -Infinity],
      ['a Date', () => new Date(0)],
      ['a Map', () => new Map([[1, 2]])],
      ['a Set', () => new Set([1])],
      ['a class instance', () => new Point()],
      ['a typed array', () => new Uint8Array([1, 2])],
      ['a cycle', () => cyclic],
      ['a sparse array', () => sparse],
      ['an array with a named property', () => Object.assign([1, 2], { x: 3 })],
      ['an object with a non-enumerable property', () => Object.defineProperty({ a: 1 }, 'b', { value: 2 })],
    ];
    const placements: [string, (value: unknown) => unknown][] = [
      ['at the top', (value) => value],
      ['inside an array', (value) => [1, value]],
      ['inside an object', (value) => ({ ok: 1, bad: value })],
      ['deeply nested', (value) => ({ a: [{ b: [value] }] })],
    ];

    for (const [what, make] of cases) {
      for (const [where, place] of placements) {
        it(`${what} ${where}: NON_SERIALIZABLE, f’s writes rolled back, nothing recorded`, async () => {
          const name = `refuse ${what} ${where}`;
          await expectCode(
            step(db.ds, name, async (tx) => {
              await writeEffect(tx, name);
              return place(make()) as Json;
            }),
            'NON_SERIALIZABLE',
          );
          expect(await status(db.ds, name)).to.equal(null);
          expect(await effects(name)).to.equal(0);
        });
      }
    }

    it('accepts -0 and returns it as 0, on the first and later calls', async () => {
      const first = await step(db.ds, 'negative zero', () => -0);
      expect(Object.is(first, 0)).to.equal(true);
      expect(Object.is(await step(db.ds, 'negative zero', () => 1), 0)).to.equal(true);
      const nested = (await step(db.ds, 'negative zero nested', () => ({ z: [-0] }))) as { z: number[] };
      expect(Object.is(nested.z[0], 0)).to.equal(true);
      expect((await status(db.ds, 'negative zero'))?.value).to.equal(0);
    });
  });

  describe('concurrency', () => {
    it('runs f once for 8 concurrent calls in one process; every caller gets the recorded value', async () => {
      let bodies = 0;
      const f = async (tx: EntityManager): Promise<Json> => {
        bodies += 1;
        const run = bodies;
        await writeEffect(tx, 'eight');
        if (DRIVER !== 'sqlite') {
          // Hold the step open until the 7 other callers really wait on its row (or, were they not
          // kept out, until another f body starts).
          while (bodies === 1 && (await rowLockWaiters(db.ds)) < 7) {
            await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
          }
        }
        return { run };
      };
      const results = await Promise.all(Array.from({ length: 8 }, () => step(db.ds, 'eight', f)));
      expect(bodies).to.equal(1);
      expect(await effects('eight')).to.equal(1);
      for (const result of results) expect(result).to.deep.equal({ run: 1 });
      expect(new Set(results).size).to.equal(8);
    });

    it('serialises two concurrent steps inside one caller transaction; both commit with the caller', async () => {
      const events: string[] = [];
      const body =
        (label: string) =>
        async (tx: EntityManager): Promise<Json> => {
          events.push(`${label} start`);
          await writeEffect(tx, label);
          await tx.query(sql('SELECT COUNT(*) FROM step_effects WHERE label = ?'), [label]);
          await writeEffect(tx, label);
          events.push(`${label} end`);
          return label;
        };
      const results = await runInTransaction(db.ds, async (tx) => {
        const both = await Promise.all([step(tx, 'sibling a', body('sibling a')), step(db.ds, 'sibling b', body('sibling b'))]);
        await writeEffect(tx, 'sibling caller');
        return both;
      });
      expect(results).to.deep.equal(['sibling a', 'sibling b']);
      // Serialised: each step's body finished before the other's began.
      expect(
        events.indexOf('sibling a end') + 1 === events.indexOf('sibling b start') ||
          events.indexOf('sibling b end') + 1 === events.indexOf('sibling a start'),
      ).to.equal(true, events.join(', '));
      expect((await status(db.ds, 'sibling a'))?.done).to.equal(true);
      expect((await status(db.ds, 'sibling b'))?.done).to.equal(true);
      expect(await effects('sibling a')).to.equal(2);
      expect(await effects('sibling b')).to.equal(2);
      expect(await effects('sibling caller')).to.equal(1);
    });

    it('rolls both sibling steps back with the caller, and a failing sibling only to its savepoint', async () => {
      const failure = new Error('caller fails');
      const error = await rejection(
        runInTransaction(db.ds, async (tx) => {
          await Promise.all([step(tx, 'rolled a', writing('rolled a')), step(tx, 'rolled b', writing('rolled b'))]);
          throw failure;
        }),
      );
      expect(error).to.equal(failure);
      expect(await status(db.ds, 'rolled a')).to.equal(null);
      expect(await status(db.ds, 'rolled b')).to.equal(null);
      expect(await effects('rolled a')).to.equal(0);
      expect(await effects('rolled b')).to.equal(0);

      const inner = new Error('one sibling fails');
      const settled = await runInTransaction(db.ds, async (tx) =>
        Promise.allSettled([
          step(tx, 'kept', writing('kept')),
          step(tx, 'failed sibling', async (t) => {
            await writeEffect(t, 'failed sibling');
            throw inner;
          }),
        ]),
      );
      expect(settled[0]).to.deep.equal({ status: 'fulfilled', value: 'kept' });
      expect(settled[1]).to.deep.equal({ status: 'rejected', reason: inner });
      expect((await status(db.ds, 'kept'))?.done).to.equal(true);
      expect(await effects('kept')).to.equal(1);
      expect(await status(db.ds, 'failed sibling')).to.equal(null);
      expect(await effects('failed sibling')).to.equal(0);
    });

    it('runs f once when 4 processes call the same step at the same moment', async () => {
      const name = 'four processes';
      const lockKey = 727274;
      // MySQL's named locks are server-wide: the name carries this test database's random name.
      const lockName = `ck_step_race_${db.url.replace(/^.*\//, '')}`;
      const hold = db.ds.createQueryRunner();
      const children: ReturnType<typeof startChild>[] = [];
      try {
        // The go signal: PostgreSQL — an exclusive advisory lock the workers wait on (shared);
        // MySQL — a named lock (GET_LOCK) each worker takes and releases; SQLite — the database
        // write lock, which the workers' steps wait on.
        if (DRIVER === 'postgres') {
          await hold.query('SELECT pg_advisory_lock($1)', [lockKey]);
        } else if (DRIVER === 'mysql') {
          await hold.query('SELECT GET_LOCK(?, 60)', [lockName]);
        } else {
          await hold.startTransaction();
          await hold.query('UPDATE step_effects SET id = id WHERE 1 = 0');
        }
        const key = DRIVER === 'mysql' ? lockName : String(lockKey);
        for (let i = 0; i < 4; i++) children.push(startChild(WORKER, ['race', db.url, name, key]));
        await Promise.all(children.map((child) => child.waitForLine((line) => line === 'ready')));
        if (DRIVER === 'postgres') {
          const waiting = "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1";
          while ((await count(db.ds, waiting, [lockKey])) < 4) await new Promise((resolve) => setTimeout(resolve, 10));
          await hold.query('SELECT pg_advisory_unlock($1)', [lockKey]);
        } else if (DRIVER === 'mysql') {
          const waiting = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE ?";
          while ((await count(db.ds, waiting, [`%${lockName}%`])) < 4) await new Promise((resolve) => setTimeout(resolve, 10));
          await hold.query('SELECT RELEASE_LOCK(?)', [lockName]);
        } else {
          await hold.commitTransaction();
        }
        const lines = await Promise.all(children.map((child) => child.waitForLine((line) => line.startsWith('result '))));
        const exits = await Promise.all(children.map((child) => child.exited));
        for (const exit of exits) expect(exit.code).to.equal(0);
        const values = lines.map((line) => JSON.parse(line.slice('result '.length)) as { pid: number });
        expect(new Set(values.map((value) => value.pid)).size).to.equal(1);
        expect(children.map((child) => child.process.pid)).to.include(values[0].pid);
        expect(await effects(name)).to.equal(1);
        expect((await status(db.ds, name))?.value).to.deep.equal(values[0]);
      } finally {
        for (const child of children) await kill(child);
        if (hold.isTransactionActive) await hold.rollbackTransaction();
        await hold.release();
      }
    });
  });

  describe('crash inside f', () => {
    it('leaves no record and no writes after SIGKILL; the rerun runs f once', async () => {
      const name = 'crash';
      const child = startChild(WORKER, ['crash', db.url, name]);
      try {
        await child.waitForLine((line) => line === 'inside f');
      } finally {
        await kill(child);
      }
      expect((await child.exited).signal).to.equal('SIGKILL');
      expect(await status(db.ds, name)).to.equal(null);
      expect(await effects(name)).to.equal(0);

      let calls = 0;
      const value = await step(db.ds, name, async (tx) => {
        calls += 1;
        await writeEffect(tx, name);
        return 'recovered';
      });
      expect(value).to.equal('recovered');
      expect(await step(db.ds, name, () => 'again')).to.equal('recovered');
      expect(calls).to.equal(1);
      expect(await effects(name)).to.equal(1);
    });
  });
});

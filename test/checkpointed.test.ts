import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { DataSource, EntityManager } from 'typeorm';
import { Checkpointed, currentManager, NoDataSourceError, runInTransaction, setDefaultDataSource, status } from '../src';
import { DRIVER, sql, useTestDatabase } from './support/database';
import { expectCode, rejection } from './support/expect-code';
import { createStepEffectsTable, effectsLabelled, StepEffect } from './fixtures/step-effect';

/** Writes one effect through the manager of the active transaction (how a decorated method writes). */
async function writeEffect(label: string): Promise<void> {
  await currentManager().query(sql('INSERT INTO step_effects (id, label) VALUES (?, ?)'), [randomUUID(), label]);
}

class Billing {
  calls = 0;

  constructor(readonly dataSource: DataSource) {}

  @Checkpointed()
  async charge(customer: string, amount: { a: number; b: number }): Promise<{ customer: string; total: number }> {
    this.calls += 1;
    await writeEffect(`charge ${customer}`);
    return { customer, total: amount.a + amount.b };
  }

  @Checkpointed()
  async refund(customer: string, reason: unknown): Promise<null> {
    this.calls += 1;
    await writeEffect(`refund ${customer} ${String(reason)}`);
    return null;
  }

  @Checkpointed({ name: 'billing:close-month' })
  async closeMonth(month: string): Promise<string> {
    this.calls += 1;
    return `closed ${month}`;
  }

  @Checkpointed({
    name: function (this: Billing, day: Date, region: string) {
      return `report:${region}:${day.toISOString().slice(0, 10)}:${this.calls}`;
    },
  })
  async report(day: Date, region: string): Promise<{ region: string }> {
    this.calls += 1;
    await writeEffect(`report ${region}`);
    return { region };
  }

  failure = new Error('declined');

  @Checkpointed()
  async failing(label: string): Promise<string> {
    await writeEffect(label);
    await currentManager().getRepository(StepEffect).insert({ id: randomUUID(), label });
    throw this.failure;
  }

  @Checkpointed()
  async viaRepository(label: string): Promise<number> {
    const repository = currentManager().getRepository(StepEffect);
    await repository.insert({ id: randomUUID(), label });
    return repository.count({ where: { label } });
  }
}

/** Marks a method by storing metadata on the function itself, as NestJS route decorators do. */
function Tag(value: string): MethodDecorator {
  return (_target, _key, descriptor) => {
    Reflect.defineMetadata('test:tag', value, descriptor.value as object);
  };
}

/** Wraps a method to count its invocations (a decorator that replaces `descriptor.value`). */
function Counted(counter: { calls: number }): MethodDecorator {
  return (_target, _key, descriptor) => {
    const original = descriptor.value as unknown as (...args: unknown[]) => unknown;
    const wrapper = function (this: unknown, ...args: unknown[]): unknown {
      counter.calls += 1;
      return original.apply(this, args);
    };
    for (const key of Reflect.getOwnMetadataKeys(original) as unknown[]) {
      Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), wrapper);
    }
    Object.defineProperty(wrapper, 'name', { value: original.name });
    Object.defineProperty(wrapper, 'length', { value: original.length });
    descriptor.value = wrapper as typeof descriptor.value;
  };
}

const outer = { calls: 0 };
const inner = { calls: 0 };

class Stacked {
  constructor(readonly dataSource: DataSource) {}

  @Counted(outer)
  @Tag('checkpointed first')
  @Checkpointed()
  async checkpointedFirst(id: number, note: string): Promise<number> {
    await writeEffect(`stacked first ${note}`);
    return id * 2;
  }

  @Checkpointed()
  @Counted(inner)
  @Tag('checkpointed last')
  async checkpointedLast(id: number, note: string, extra?: boolean): Promise<number> {
    await writeEffect(`stacked last ${note}`);
    return extra ? id : id * 3;
  }
}

describe(`@Checkpointed (${DRIVER})`, () => {
  const db = useTestDatabase('checkpointed', { entities: [StepEffect] });
  let other: DataSource;

  before(async () => {
    other = await db.open({ entities: [StepEffect] });
    await createStepEffectsTable(db.ds);
  });

  afterEach(() => setDefaultDataSource(null));

  const effects = (label: string) => effectsLabelled(db.ds, label);

  /** Which of our DataSources the active step's transaction belongs to. */
  function usedDataSource(): DataSource | undefined {
    return [db.ds, other].find((candidate) => currentManager(candidate) === currentManager());
  }

  describe('names', () => {
    it('defaults to Class.method(canonical JSON args): argument key order does not matter', async () => {
      const billing = new Billing(db.ds);
      expect(await billing.charge('c1', { b: 1, a: 2 })).to.deep.equal({ customer: 'c1', total: 3 });
      expect(await billing.charge('c1', { a: 2, b: 1 })).to.deep.equal({ customer: 'c1', total: 3 });
      expect(billing.calls).to.equal(1);
      expect(await effects('charge c1')).to.equal(1);
      const stored = await status(db.ds, 'Billing.charge("c1",{"a":2,"b":1})');
      expect(stored).to.include({ kind: 'step', done: true });
      expect(stored?.value).to.deep.equal({ customer: 'c1', total: 3 });

      expect(await billing.charge('c2', { a: 2, b: 1 })).to.deep.equal({ customer: 'c2', total: 3 });
      expect(billing.calls).to.equal(2);
      expect(await status(db.ds, 'Billing.charge("c2",{"a":2,"b":1})')).to.not.equal(null);
      const fresh = new Billing(db.ds);
      expect(await fresh.charge('c1', { a: 2, b: 1 })).to.deep.equal({ customer: 'c1', total: 3 });
      expect(fresh.calls).to.equal(0);
    });

    it('sorts nested keys and encodes strings exactly', async () => {
      const billing = new Billing(db.ds);
      expect(await billing.refund('c"3', { z: [{ y: 1, x: 2 }], a: null })).to.equal(null);
      expect(await status(db.ds, 'Billing.refund("c\\"3",{"a":null,"z":[{"x":2,"y":1}]})')).to.include({ done: true });
    });

    it('refuses arguments that are not JSON with NON_SERIALIZABLE and does not call the method', async () => {
      const billing = new Billing(db.ds);
      for (const reason of [new Date(0), undefined, () => 1, new Map(), NaN, BigInt(2), { when: new Date(0) }]) {
        await expectCode(billing.refund('c4', reason), 'NON_SERIALIZABLE');
      }
      expect(billing.calls).to.equal(0);
      expect(await effects('refund c4 undefined')).to.equal(0);
    });

    it('uses a fixed name given as a string, whatever the arguments', async () => {
      const billing = new Billing(db.ds);
      expect(await billing.closeMonth('2026-01')).to.equal('closed 2026-01');
      expect(await billing.closeMonth('2026-02')).to.equal('closed 2026-01');
      expect(billing.calls).to.equal(1);
      expect((await status(db.ds, 'billing:close-month'))?.value).to.equal('closed 2026-01');
    });

    it('uses a name function called with the arguments and the instance, so non-JSON arguments are fine', async () => {
      const billing = new Billing(db.ds);
      const day = new Date(Date.UTC(2026, 0, 15));
      expect(await billing.report(day, 'eu')).to.deep.equal({ region: 'eu' });
      expect(billing.calls).to.equal(1);
      billing.calls = 0;
      expect(await billing.report(day, 'eu')).to.deep.equal({ region: 'eu' });
      expect(billing.calls).to.equal(0);
      expect((await status(db.ds, 'report:eu:2026-01-15:0'))?.value).to.deep.equal({ region: 'eu' });
      expect(await effects('report eu')).to.equal(1);
    });

    it('refuses a name function that returns no usable name with INVALID_ARGUMENT', async () => {
      class Odd {
        constructor(readonly dataSource: DataSource) {}

        @Checkpointed({ name: () => '' })
        async run(): Promise<number> {
          return 1;
        }
      }
      await expectCode(new Odd(db.ds).run(), 'INVALID_ARGUMENT');
    });
  });

  describe('data source resolution', () => {
    class Plain {
      calls = 0;

      @Checkpointed()
      async work(label: string): Promise<string> {
        this.calls += 1;
        await writeEffect(label);
        return usedDataSource() === db.ds ? 'ds' : usedDataSource() === other ? 'other' : 'unknown';
      }
    }
    class WithDataSource extends Plain {
      constructor(readonly dataSource: DataSource) {
        super();
      }
    }
    class WithManager extends Plain {
      constructor(readonly manager: EntityManager) {
        super();
      }
    }
    class WithBoth extends Plain {
      constructor(
        readonly dataSource: DataSource,
        readonly manager: EntityManager,
      ) {
        super();
      }
    }
    let lazy: DataSource | undefined;
    class WithOption {
      constructor(readonly dataSource: DataSource) {}

      @Checkpointed({ dataSource: () => lazy as DataSource })
      async viaGetter(label: string): Promise<string> {
        await writeEffect(label);
        return usedDataSource() === db.ds ? 'ds' : 'other';
      }
    }

    it('1. joins the transaction active in the async context before anything else', async () => {
      lazy = other;
      const service = new WithOption(other);
      const failure = new Error('caller rolls back');
      const error = await rejection(
        runInTransaction(db.ds, async () => {
          expect(await service.viaGetter('rung 1')).to.equal('ds');
          throw failure;
        }),
      );
      expect(error).to.equal(failure);
      expect(await status(db.ds, 'WithOption.viaGetter("rung 1")')).to.equal(null);
      expect(await effects('rung 1')).to.equal(0);
    });

    it('2. then options.dataSource (a DataSource or a getter read on each call) over the instance property', async () => {
      lazy = other;
      const service = new WithOption(db.ds);
      expect(await service.viaGetter('rung 2 getter')).to.equal('other');
      lazy = db.ds;
      expect(await service.viaGetter('rung 2 getter again')).to.equal('ds');

      class Fixed {
        constructor(readonly dataSource: DataSource) {}

        @Checkpointed({ dataSource: other })
        async run(label: string): Promise<string> {
          await writeEffect(label);
          return usedDataSource() === other ? 'other' : 'ds';
        }
      }
      expect(await new Fixed(db.ds).run('rung 2 fixed')).to.equal('other');
      expect(await effects('rung 2 fixed')).to.equal(1);
      // A getter that yields nothing falls through to the instance.
      lazy = undefined;
      expect(await new WithOption(other).viaGetter('rung 2 nothing')).to.equal('other');
    });

    it('3. then the instance’s dataSource property, or else its manager property', async () => {
      expect(await new WithDataSource(other).work('rung 3 dataSource')).to.equal('other');
      expect(await new WithManager(other.manager).work('rung 3 manager')).to.equal('other');
      expect(await new WithBoth(other, db.ds.manager).work('rung 3 both')).to.equal('other');
      expect(await effects('rung 3 manager')).to.equal(1);
    });

    it('3b. an instance manager that is a transaction’s manager joins that transaction', async () => {
      const failure = new Error('caller rolls back');
      const error = await rejection(
        db.ds.transaction(async (tx) => {
          expect(await new WithManager(tx).work('rung 3 tx manager')).to.equal('ds');
          throw failure;
        }),
      );
      expect(error).to.equal(failure);
      expect(await status(db.ds, 'Plain.work("rung 3 tx manager")')).to.equal(null);
      expect(await effects('rung 3 tx manager')).to.equal(0);
    });

    it('4. then the default from setDefaultDataSource', async () => {
      setDefaultDataSource(other);
      const plain = new Plain();
      expect(await plain.work('rung 4')).to.equal('other');
      expect(plain.calls).to.equal(1);
      expect(await status(db.ds, 'Plain.work("rung 4")')).to.include({ done: true });
      // The instance's property still comes before the default.
      expect(await new WithDataSource(db.ds).work('rung 4 below 3')).to.equal('ds');
      expect(await new WithManager(db.ds.manager).work('rung 4 below 3 manager')).to.equal('ds');
    });

    it('5. else NO_DATA_SOURCE, without calling the method', async () => {
      const plain = new Plain();
      const error = await expectCode(plain.work('rung 5'), 'NO_DATA_SOURCE');
      expect(error).to.be.instanceOf(NoDataSourceError);
      expect(plain.calls).to.equal(0);
      expect(await status(db.ds, 'Plain.work("rung 5")')).to.equal(null);
    });

    it('names the step after the declaring class, so subclasses share it', async () => {
      const first = new WithDataSource(db.ds);
      expect(await first.work('declaring class')).to.equal('ds');
      const second = new WithManager(db.ds.manager);
      expect(await second.work('declaring class')).to.equal('ds');
      expect(second.calls).to.equal(0);
      expect(await status(db.ds, 'Plain.work("declaring class")')).to.include({ done: true });
    });
  });

  describe('transactions', () => {
    it('commits the method’s writes (currentManager() and its repositories) with the step record', async () => {
      const billing = new Billing(db.ds);
      expect(await billing.viaRepository('repo write')).to.equal(1);
      expect(await billing.viaRepository('repo write')).to.equal(1);
      expect(await effects('repo write')).to.equal(1);
      expect((await status(db.ds, 'Billing.viaRepository("repo write")'))?.value).to.equal(1);
    });

    it('rolls the method’s writes back and records nothing when it throws; the same error re-raises', async () => {
      const billing = new Billing(db.ds);
      expect(await rejection(billing.failing('declined'))).to.equal(billing.failure);
      expect(await effects('declined')).to.equal(0);
      expect(await status(db.ds, 'Billing.failing("declined")')).to.equal(null);
    });

    it('inside runInTransaction joins through a savepoint and rolls back with the caller', async () => {
      const billing = new Billing(db.ds);
      const failure = new Error('caller fails');
      const error = await rejection(
        runInTransaction(db.ds, async (tx) => {
          expect(await billing.charge('c9', { a: 1, b: 1 })).to.deep.equal({ customer: 'c9', total: 2 });
          await tx.query(sql('INSERT INTO step_effects (id, label) VALUES (?, ?)'), [randomUUID(), 'caller c9']);
          throw failure;
        }),
      );
      expect(error).to.equal(failure);
      expect(await status(db.ds, 'Billing.charge("c9",{"a":1,"b":1})')).to.equal(null);
      expect(await effects('charge c9')).to.equal(0);
      expect(await effects('caller c9')).to.equal(0);

      await runInTransaction(db.ds, async (tx) => {
        // A failing step rolls back to its savepoint only; the caller's transaction goes on.
        expect(await rejection(billing.failing('inner c9'))).to.equal(billing.failure);
        expect(await billing.charge('c9', { a: 1, b: 1 })).to.deep.equal({ customer: 'c9', total: 2 });
        await tx.query(sql('INSERT INTO step_effects (id, label) VALUES (?, ?)'), [randomUUID(), 'caller c9']);
      });
      expect((await status(db.ds, 'Billing.charge("c9",{"a":1,"b":1})'))?.done).to.equal(true);
      expect(await effects('charge c9')).to.equal(1);
      expect(await effects('caller c9')).to.equal(1);
      expect(await effects('inner c9')).to.equal(0);
    });
  });

  describe('decorator hygiene', () => {
    it('keeps design:* reflect metadata and the method’s name and length', () => {
      expect(Reflect.getMetadata('design:paramtypes', Billing.prototype, 'charge')).to.deep.equal([String, Object]);
      expect(Reflect.getMetadata('design:returntype', Billing.prototype, 'charge')).to.equal(Promise);
      expect(Reflect.getMetadata('design:type', Billing.prototype, 'charge')).to.equal(Function);
      expect(Billing.prototype.charge.name).to.equal('charge');
      expect(Billing.prototype.charge.length).to.equal(2);
      expect(Billing.prototype.closeMonth.length).to.equal(1);
      expect(Reflect.getMetadata('design:paramtypes', Stacked.prototype, 'checkpointedLast')).to.deep.equal([Number, String, Boolean]);
      expect(Stacked.prototype.checkpointedLast.name).to.equal('checkpointedLast');
      expect(Stacked.prototype.checkpointedLast.length).to.equal(3);
    });

    it('stacks with other method decorators in both orders', async () => {
      expect(Reflect.getMetadata('test:tag', Stacked.prototype.checkpointedFirst)).to.equal('checkpointed first');
      expect(Reflect.getMetadata('test:tag', Stacked.prototype.checkpointedLast)).to.equal('checkpointed last');
      const service = new Stacked(db.ds);
      outer.calls = 0;
      inner.calls = 0;
      expect(await service.checkpointedFirst(2, 'x')).to.equal(4);
      expect(await service.checkpointedFirst(2, 'x')).to.equal(4);
      expect(await service.checkpointedLast(5, 'y')).to.equal(15);
      expect(await service.checkpointedLast(5, 'y')).to.equal(15);
      // The outer wrapper sees every call; a wrapper inside @Checkpointed runs only for the first.
      expect(outer.calls).to.equal(2);
      expect(inner.calls).to.equal(1);
      expect(await effects('stacked first x')).to.equal(1);
      expect(await effects('stacked last y')).to.equal(1);
      expect(await status(db.ds, 'Stacked.checkpointedFirst(2,"x")')).to.include({ done: true });
      expect(await status(db.ds, 'Stacked.checkpointedLast(5,"y")')).to.include({ done: true });
    });
  });
});

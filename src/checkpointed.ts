import type { DataSource } from 'typeorm';
import { InvalidArgumentError, NoDataSourceError } from './core/errors';
import { canonicalJson, type Json } from './core/json';
import { step } from './jobs/step';
import { activeDataSource, type Db, getDefaultDataSource, isEntityManager } from './core/transaction';

/** Options of {@link Checkpointed}. */
export interface CheckpointedOptions {
  /** The step's name: fixed, or computed from the call's arguments (`this` is the instance). Default: `Class.method(<canonical JSON of each argument>)`. */
  name?: string | ((...args: any[]) => string);
  /** The DataSource to use when no transaction is active in the async context; a getter is read on each call. Default: the instance's `dataSource` or `manager` property, then {@link setDefaultDataSource}'s. */
  dataSource?: DataSource | (() => DataSource);
}

type AnyFunction = (this: unknown, ...args: unknown[]) => unknown;

function isDb(value: unknown): value is Db {
  if (isEntityManager(value)) return true;
  return typeof value === 'object' && value !== null && 'initialize' in value && 'createQueryRunner' in value;
}

/** The decorator's rungs in the order the SPEC gives: active transaction, option, instance, default. */
function resolveDb(instance: unknown, option: CheckpointedOptions['dataSource'], stepName: string): Db {
  const active = activeDataSource();
  if (active) return active;
  const fromOption = typeof option === 'function' ? option() : option;
  if (fromOption !== undefined && fromOption !== null) {
    if (!isDb(fromOption))
      throw new InvalidArgumentError(`@Checkpointed: the dataSource option of ${stepName} is not a TypeORM DataSource.`);
    return fromOption;
  }
  if (typeof instance === 'object' && instance !== null) {
    const { dataSource, manager } = instance as { dataSource?: unknown; manager?: unknown };
    if (isDb(dataSource)) return dataSource;
    if (isDb(manager)) return manager;
  }
  const fallback = getDefaultDataSource();
  if (fallback) return fallback;
  throw new NoDataSourceError(
    `@Checkpointed ${stepName} found no data source: call it inside runInTransaction(), pass { dataSource }, ` +
      'give the instance a `dataSource` or `manager` property, or call setDefaultDataSource().',
  );
}

/** Copies reflect metadata stored on the function itself (NestJS route/guard metadata lives there). */
function copyFunctionMetadata(from: object, to: object): void {
  const reflect = Reflect as unknown as {
    getOwnMetadataKeys?(target: object): unknown[];
    getOwnMetadata?(key: unknown, target: object): unknown;
    defineMetadata?(key: unknown, value: unknown, target: object): void;
  };
  if (!reflect.getOwnMetadataKeys || !reflect.getOwnMetadata || !reflect.defineMetadata) return;
  for (const key of reflect.getOwnMetadataKeys(from)) reflect.defineMetadata(key, reflect.getOwnMetadata(key, from), to);
}

/**
 * Turns a method into a memoised step: calling it runs
 * `step(db, name, () => original.apply(this, args))`, so its result (which must be JSON) is
 * recorded in the same transaction as the writes it makes through `currentManager()`.
 * The default name is `Class.method(<canonical JSON of each argument>)`. The DataSource is the active
 * transaction's, else the option's, else the instance's, else the default; with none, the call rejects
 * with `NO_DATA_SOURCE`. A result that is not JSON rejects with `NON_SERIALIZABLE`.
 */
export function Checkpointed(options: CheckpointedOptions = {}): MethodDecorator {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('@Checkpointed(options): options must be an object.');
  }
  const { name, dataSource } = options;
  if (name !== undefined && typeof name !== 'string' && typeof name !== 'function') {
    throw new InvalidArgumentError('@Checkpointed: name must be a string or a function returning one.');
  }
  return (target, propertyKey, descriptor) => {
    const original = descriptor.value as unknown;
    if (typeof original !== 'function') {
      throw new InvalidArgumentError(`@Checkpointed decorates methods; ${String(propertyKey)} is not one.`);
    }
    // The declaring class, so a subclass calling an inherited method runs the same step.
    const className = typeof target === 'function' ? target.name : target.constructor.name;
    const methodName = typeof propertyKey === 'symbol' ? (propertyKey.description ?? '') : propertyKey;
    const label = `${className}.${methodName}`;

    // Not an async function: it hands back step's own promise rather than wrapping it in another
    // (a measurable share of a cache hit); a synchronous failure still becomes a rejection.
    const wrapper = function (this: unknown, ...args: unknown[]): Promise<Json> {
      try {
        const stepName =
          typeof name === 'string'
            ? name
            : typeof name === 'function'
              ? name.apply(this, args)
              : `${label}(${args.map((arg, i) => canonicalJson(arg, `Argument ${i + 1} of ${label}`)).join(',')})`;
        const db = resolveDb(this, dataSource, label);
        return step(db, stepName, () => (original as AnyFunction).apply(this, args) as Json | Promise<Json>);
      } catch (error) {
        return Promise.reject(error);
      }
    };
    copyFunctionMetadata(original, wrapper);
    Object.defineProperty(wrapper, 'name', { value: original.name, configurable: true });
    Object.defineProperty(wrapper, 'length', { value: original.length, configurable: true });
    descriptor.value = wrapper as typeof descriptor.value;
    return descriptor;
  };
}

import { NonSerializableError } from './errors';

/** A value that survives `JSON.stringify` → `JSON.parse` unchanged. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'number') return String(value);
  if (typeof value === 'bigint') return 'a bigint';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  const constructorName = (value as object).constructor?.name;
  return constructorName ? `a ${constructorName}` : 'an object without a plain prototype';
}

function check(value: unknown, path: string, ancestors: Set<object>, what: string): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (Number.isFinite(value)) return;
      break;
    case 'object': {
      if (value === null) return;
      if (ancestors.has(value)) throw new NonSerializableError(`${what} contains a cycle at ${path}.`);
      const proto = Object.getPrototypeOf(value) as unknown;
      const isArray = Array.isArray(value) && proto === Array.prototype;
      if (!isArray && proto !== Object.prototype && proto !== null) break;
      if (Object.getOwnPropertySymbols(value).length > 0) {
        throw new NonSerializableError(`${what} has symbol keys at ${path}, which JSON drops.`);
      }
      ancestors.add(value);
      // Own properties JSON does not write: an array's named ones (beside `length`), an object's non-enumerable ones.
      const names = Object.getOwnPropertyNames(value);
      if (isArray) {
        const array = value as unknown[];
        for (let i = 0; i < array.length; i++) {
          if (!(i in array)) throw new NonSerializableError(`${what} is a sparse array at ${path} (hole at ${i}).`);
          check(array[i], `${path}[${i}]`, ancestors, what);
        }
        if (names.length !== array.length + 1) {
          const extra = names.find((name) => name !== 'length' && !/^(0|[1-9][0-9]*)$/.test(name));
          throw new NonSerializableError(`${what} is an array with a named property at ${path} ("${extra}"), which JSON drops.`);
        }
      } else {
        const entries = Object.entries(value);
        if (names.length !== entries.length) {
          const hidden = names.find((name) => !Object.prototype.propertyIsEnumerable.call(value, name));
          throw new NonSerializableError(`${what} has a non-enumerable property at ${path} ("${hidden}"), which JSON drops.`);
        }
        for (const [key, item] of entries) check(item, `${path}.${key}`, ancestors, what);
      }
      ancestors.delete(value);
      return;
    }
  }
  throw new NonSerializableError(
    `${what} must survive a JSON round trip unchanged, but ${path} is ${describe(value)}; convert it to plain JSON (e.g. a Date to an ISO string) first.`,
  );
}

/** Throws NON_SERIALIZABLE unless `value` is plain JSON; returns its JSON text. `-0` is stored as `0`. */
export function encodeJson(value: unknown, what = 'The value'): string {
  check(value, '$', new Set(), what);
  return JSON.stringify(value);
}

export function decodeJson(text: string | null): Json {
  return text === null ? null : (JSON.parse(text) as Json);
}

/** `JSON.stringify` with object keys sorted recursively; NON_SERIALIZABLE for non-JSON input. */
export function canonicalJson(value: unknown, what = 'The value'): string {
  // Primitives, the usual method arguments, need neither the walk nor the key-sorting replacer.
  const type = typeof value;
  if (type === 'string' || type === 'boolean' || value === null || (type === 'number' && Number.isFinite(value)))
    return JSON.stringify(value);
  check(value, '$', new Set(), what);
  return JSON.stringify(value, (_key, item: unknown) => {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) return item;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(item).sort()) sorted[key] = (item as Record<string, unknown>)[key];
    return sorted;
  });
}

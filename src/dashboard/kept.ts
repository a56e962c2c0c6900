/** How many values a cache of `kept` holds (all of them dropped when full: odd URLs only cost making them again). */
const KEPT_LIMIT = 256;
/** Values of longer keys (long queries) are made every time, so what is kept stays small. */
const KEPT_KEY_CHARS = 2048;

/**
 * The value kept in `cache` under `key`, made by `make` the first time: for what a request's URL
 * alone decides (a page refreshing itself asks for the same URL every few seconds). Bounded in
 * entries and key length. A kept value is shared by every request of its key: never change it.
 */
export function kept<V>(cache: Map<string, V>, key: string, make: () => V): V {
  let value = cache.get(key);
  if (value === undefined) {
    value = make();
    if (key.length <= KEPT_KEY_CHARS) {
      if (cache.size >= KEPT_LIMIT) cache.clear();
      cache.set(key, value);
    }
  }
  return value;
}

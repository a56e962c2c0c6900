/**
 * A JSON number as the source wrote it: `12.50` stays `12.50` for a numeric column, and an int8
 * beyond 2^53 keeps every digit (Node 20's JSON.parse has no access to a number's source text).
 */
export class JsonNumber {
  constructor(readonly text: string) {}

  toJSON(): number {
    return Number(this.text);
  }
}

/** Why a JSON text could not be read; the caller turns it into an invalid row. */
export class JsonSyntaxError extends Error {}

const WHITESPACE = /[ \t\n\r]*/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;

/**
 * Parses one JSON text strictly (RFC 8259), numbers as `JsonNumber`; objects keep the last of
 * repeated keys, as JSON.parse does.
 */
export function parseJson(text: string): unknown {
  let at = 0;
  const skip = () => {
    WHITESPACE.lastIndex = at;
    WHITESPACE.test(text);
    at = WHITESPACE.lastIndex;
  };
  const fail = (what: string): never => {
    throw new JsonSyntaxError(`invalid JSON at character ${at}: ${what}`);
  };
  const string = (): string => {
    STRING.lastIndex = at;
    const match = STRING.exec(text);
    if (!match) fail('a malformed string');
    at = STRING.lastIndex;
    return JSON.parse(match![0]) as string;
  };
  const value = (depth: number): unknown => {
    if (depth > 512) fail('nested too deeply');
    skip();
    const c = text[at];
    if (c === '"') return string();
    if (c === '{') {
      at++;
      const object: Record<string, unknown> = {};
      skip();
      if (text[at] === '}') {
        at++;
        return object;
      }
      for (;;) {
        skip();
        if (text[at] !== '"') fail('expected a string key');
        const key = string();
        skip();
        if (text[at++] !== ':') fail("expected ':'");
        Object.defineProperty(object, key, { value: value(depth + 1), enumerable: true, writable: true, configurable: true });
        skip();
        const next = text[at++];
        if (next === '}') return object;
        if (next !== ',') fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      at++;
      const array: unknown[] = [];
      skip();
      if (text[at] === ']') {
        at++;
        return array;
      }
      for (;;) {
        array.push(value(depth + 1));
        skip();
        const next = text[at++];
        if (next === ']') return array;
        if (next !== ',') fail("expected ',' or ']'");
      }
    }
    if (c === '-' || (c >= '0' && c <= '9')) {
      NUMBER.lastIndex = at;
      const match = NUMBER.exec(text);
      if (!match) fail('a malformed number');
      at = NUMBER.lastIndex;
      return new JsonNumber(match![0]);
    }
    for (const [literal, result] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (text.startsWith(literal, at)) {
        at += literal.length;
        return result;
      }
    }
    return fail(at >= text.length ? 'the text ends early' : `unexpected ${JSON.stringify(c)}`);
  };
  const result = value(0);
  skip();
  if (at < text.length) fail('text after the end of the value');
  return result;
}

/** JSON text of a parsed value, numbers as written in the source. */
export function jsonText(value: unknown): string {
  if (value instanceof JsonNumber) return value.text;
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  if (typeof value === 'object' && value !== null && typeof (value as { toJSON?: unknown }).toJSON !== 'function') {
    return `{${Object.entries(value)
      .map(([key, item]) => `${JSON.stringify(key)}:${jsonText(item)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The value with numbers as JavaScript numbers: what a handler is given. */
export function plainJson(value: unknown): unknown {
  if (value instanceof JsonNumber) return Number(value.text);
  if (Array.isArray(value)) return value.map(plainJson);
  if (typeof value === 'object' && value !== null) {
    const plain: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) plain[key] = plainJson(item);
    return plain;
  }
  return value;
}

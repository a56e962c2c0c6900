import type { SqlLexicon } from '../dialect';
import { InvalidArgumentError } from './errors';

/** A SQL fragment whose `:name` parameters became driver placeholders, and the values they bind. */
export interface BoundFragment {
  text: string;
  values: unknown[];
}

// A parameter name starts with a letter or `_`, so PostgreSQL slices such as `a[1:2]` are left alone.
const NAME = /^(\.\.\.)?([A-Za-z_][A-Za-z0-9_]*)/;

/** True when the string literal opening at `i` lets a backslash escape the next character. */
function backslashEscapes(text: string, i: number, lexicon: SqlLexicon): boolean {
  // MySQL: '…' and "…" (a string there, by default) always.
  if (lexicon.backslashEscapes === 'always') return text[i] === "'" || text[i] === '"';
  if (text[i] !== "'") return false;
  // PostgreSQL: only E'…' strings (the E not the end of a longer word).
  return lexicon.backslashEscapes === 'e-prefix' && /(^|[^A-Za-z0-9_$])[Ee]$/.test(text.slice(Math.max(0, i - 2), i));
}

/** Where the quoted part (literal, identifier or comment) that starts at `start` ends (exclusive). */
function quotedEnd(text: string, start: number, backslashEscapes: boolean): number {
  const open = text[start];
  if (open === '-') {
    const end = text.indexOf('\n', start);
    return end < 0 ? text.length : end + 1;
  }
  if (open === '/') {
    const end = text.indexOf('*/', start + 2);
    return end < 0 ? text.length : end + 2;
  }
  if (open === '$') {
    const tag = /^\$([A-Za-z_][A-Za-z_0-9]*)?\$/.exec(text.slice(start))![0];
    const end = text.indexOf(tag, start + tag.length);
    return end < 0 ? text.length : end + tag.length;
  }
  // ' " or `: a doubled quote character stands for itself; in a string a backslash may escape.
  for (let i = start + 1; i < text.length; i++) {
    if (backslashEscapes && text[i] === '\\') {
      i++;
    } else if (text[i] === open) {
      if (text[i + 1] !== open) return i + 1;
      i++;
    }
  }
  return text.length;
}

/** True when a quoted part (string, quoted identifier, comment, dollar quote) starts at `i`. */
function quoteStarts(text: string, i: number, lexicon: SqlLexicon): boolean {
  const c = text[i];
  if (c === "'" || c === '"' || c === '`') return true;
  if (c === '-' && text[i + 1] === '-') return true;
  if (c === '/' && text[i + 1] === '*') return true;
  // `$tag$` opens a dollar quote only where `$` cannot continue an identifier (e.g. `a$b`).
  return (
    lexicon.dollarQuotes && c === '$' && /^\$([A-Za-z_][A-Za-z_0-9]*)?\$/.test(text.slice(i)) && !/[A-Za-z0-9_$]/.test(text[i - 1] ?? '')
  );
}

/**
 * Replaces the `:name` (and `:...name` for an array, one placeholder per element) parameters of a
 * SQL condition with the dialect's placeholders (numbered from `firstIndex`), outside
 * string literals, quoted identifiers, comments and `::` casts; a name missing from `parameters`
 * is INVALID_ARGUMENT. Values are always bound, never written into the SQL text — TypeORM's own expansion
 * writes numbers into SQLite SQL, splices functions, and also rewrites `:x` inside quoted names.
 */
export function bindNamedParameters(
  text: string,
  parameters: Record<string, unknown>,
  dialect: { lexicon: SqlLexicon; placeholder(n: number): string; bindable(value: unknown): unknown },
  firstIndex = 1,
): BoundFragment {
  const values: unknown[] = [];
  const next = (value: unknown) => {
    values.push(dialect.bindable(value));
    return dialect.placeholder(firstIndex + values.length - 1);
  };
  let out = '';
  let i = 0;
  while (i < text.length) {
    if (quoteStarts(text, i, dialect.lexicon)) {
      const end = quotedEnd(text, i, backslashEscapes(text, i, dialect.lexicon));
      out += text.slice(i, end);
      i = end;
      continue;
    }
    if (text[i] === ':' && text[i + 1] === ':') {
      out += '::';
      i += 2;
      continue;
    }
    const match = text[i] === ':' ? NAME.exec(text.slice(i + 1)) : null;
    if (!match) {
      out += text[i++];
      continue;
    }
    const [whole, spread, name] = match;
    if (!Object.prototype.hasOwnProperty.call(parameters, name)) {
      throw new InvalidArgumentError(`The condition uses :${name} but parameters has no "${name}".`);
    }
    const value = parameters[name];
    if (typeof value === 'function') {
      throw new InvalidArgumentError(`parameters.${name} is a function; parameters are bound as values, never spliced into SQL.`);
    }
    if (spread) {
      if (!Array.isArray(value) || value.length === 0) {
        throw new InvalidArgumentError(`:...${name} needs a non-empty array in parameters.${name}.`);
      }
      out += value.map(next).join(', ');
    } else {
      out += next(value);
    }
    i += 1 + whole.length;
  }
  return { text: out, values };
}

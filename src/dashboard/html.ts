/**
 * Escape-by-default HTML: every value interpolated into `html`…`` is escaped unless it is itself
 * `Html` (made by `html` or, for trusted fixed markup only, `raw`). Arrays are joined.
 */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

/** The character codes of `& < > " ' \``, all below 97: a table lookup per character. */
const SPECIAL_CODES = new Uint8Array(97);
for (const c of Object.keys(ENTITIES)) SPECIAL_CODES[c.charCodeAt(0)] = 1;

/**
 * Escapes `value` for text and quoted attributes: the HTML specials become entities, and so does
 * every character outside ASCII (`&#8212;`), so that a page is all ASCII: one byte per character
 * for V8 to join and for Node to encode (see `sendPage`).
 */
export function escapeHtml(value: string): string {
  // Most values (names, numbers, times) have nothing to escape: one pass over their characters,
  // cheaper than a regular expression call on such short strings, and the string kept as it is.
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 97 ? SPECIAL_CODES[c] === 1 : c > 126) return escapeFrom(value, i);
  }
  return value;
}

function escapeFrom(value: string, first: number): string {
  let out = value.slice(0, first);
  let start = first;
  for (let i = first; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 97 ? SPECIAL_CODES[c] !== 1 : c <= 126) continue;
    out += value.slice(start, i);
    if (c < 97) {
      out += ENTITIES[value[i]];
    } else {
      // A character outside ASCII, by its code point (a pair of surrogates is one character).
      const point = value.codePointAt(i)!;
      out += `&#${point};`;
      if (point > 0xffff) i += 1;
    }
    start = i + 1;
  }
  return out + value.slice(start);
}

/** Trusted markup, never user data. */
export function raw(text: string): Html {
  return new Html(text);
}

function interpolate(value: unknown): string {
  // The common cases first: text to escape, markup made by `html`, numbers (nothing to escape).
  if (typeof value === 'string') return escapeHtml(value);
  if (value instanceof Html) return value.text;
  if (typeof value === 'number') return String(value);
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) {
    let out = '';
    for (const item of value) out += interpolate(item);
    return out;
  }
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) {
    out += interpolate(values[i]);
    out += strings[i + 1];
  }
  return new Html(out);
}

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

const SPECIALS = /[&<>"'`]/g;

/** The character codes of `& < > " ' \``, all below 97: a table lookup per character. */
const SPECIAL_CODES = new Uint8Array(97);
for (const c of Object.keys(ENTITIES)) SPECIAL_CODES[c.charCodeAt(0)] = 1;

export function escapeHtml(value: string): string {
  // Most values (names, numbers, times) have nothing to escape: one pass over their characters,
  // cheaper than a regular expression call on such short strings, and the string kept as it is.
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 97 && SPECIAL_CODES[c] === 1) return value.replace(SPECIALS, (s) => ENTITIES[s]);
  }
  return value;
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
  for (let i = 0; i < values.length; i++) out += interpolate(values[i]) + strings[i + 1];
  return new Html(out);
}

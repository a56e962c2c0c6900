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

const SPECIAL = /[&<>"'`]/;

export function escapeHtml(value: string): string {
  // Most values have nothing to escape: test once instead of rebuilding the string.
  return SPECIAL.test(value) ? value.replace(/[&<>"'`]/g, (c) => ENTITIES[c]) : value;
}

/** Trusted markup, never user data. */
export function raw(text: string): Html {
  return new Html(text);
}

function interpolate(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(interpolate).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += interpolate(values[i]) + strings[i + 1];
  return new Html(out);
}

import { InvalidInputError } from '../core/errors';
import { checkId, describeValue, integerFromText, type Row } from './row';

// Grammar: what the scanner expects next outside of a token.
const VALUE = 0;
const VALUE_OR_CLOSE = 1; // right after '['
const KEY = 2; // after ',' in an object
const KEY_OR_CLOSE = 3; // right after '{'
const COLON = 4;
const COMMA_OR_CLOSE = 5;
const DONE = 6;

// Token being read (possibly split across chunks).
const NONE = 0;
const STRING = 1;
const ESCAPE = 2;
const UNICODE = 3;
const NUMBER = 4;
const LITERAL = 5;

// Number sub-states (RFC 8259 grammar); the ones marked `end` may finish the number.
const N_MINUS = 0;
const N_ZERO = 1; // end
const N_INT = 2; // end
const N_DOT = 3;
const N_FRACTION = 4; // end
const N_E = 5;
const N_E_SIGN = 6;
const N_EXPONENT = 7; // end

const STRING_RUN = /[^"\\\u0000-\u001f]*/y;
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
const LITERALS: Record<string, string> = { t: 'true', f: 'false', n: 'null' };

/** What the `id` or `value` key of the row held (the last occurrence wins, as in JSON.parse). */
type Field = { kind: 'missing' } | { kind: 'string' | 'number'; text: string } | { kind: 'other'; value: unknown };

const MISSING: Field = { kind: 'missing' };

/** INVALID_INPUT for a JSON syntax error, in item `index` where it lies within one. */
export function invalidJson(what: string, index?: number): InvalidInputError {
  return new InvalidInputError(index === undefined ? `Invalid JSON: ${what}.` : `Invalid JSON in item ${index}: ${what}.`, index);
}

/** INVALID_INPUT for item `index` that is not a JSON object. */
export function notAnObject(index: number): InvalidInputError {
  return new InvalidInputError(`Row ${index} must be an object with id and value.`, index);
}

/**
 * A strict, incremental JSON scanner specialised to one row: an object read as its text comes (an
 * item of a JSON array, an NDJSON line), seeing each number's source text (Node 20's JSON.parse
 * cannot tell `1` from `1.0`), keeping only its `id` and `value`, and reporting errors with the
 * row's index.
 */
export class JsonRowScanner {
  /** Index of the current row (the next one once `row()` took it). */
  index = 0;

  private readonly stack: boolean[] = []; // true: object, false: array
  private expect = VALUE;
  private token = NONE;
  private text = '';
  private keepText = false;
  private isKey = false;
  private hex = 0;
  private hexDigits = 0;
  private numberState = N_MINUS;
  private literal = '';
  private literalAt = 0;
  private key: string | null = null;
  private id: Field = MISSING;
  private value: Field = MISSING;

  /** Starts row `index`. */
  begin(index: number): void {
    this.index = index;
    // After a complete row the stack is empty already (setting the length costs a runtime call).
    if (this.stack.length > 0) this.stack.length = 0;
    this.expect = VALUE;
    this.token = NONE;
    this.text = '';
    this.key = null;
    this.id = MISSING;
    this.value = MISSING;
  }

  /**
   * Reads the row's text on from `chunk[from]`: the position right after its closing brace, or -1
   * when it goes on past the chunk. Only whitespace may follow it (a write after the brace checks).
   */
  write(chunk: string, from = 0): number {
    const n = chunk.length;
    let i = from;
    let numberStart = from;
    while (i < n) {
      switch (this.token) {
        case STRING: {
          STRING_RUN.lastIndex = i;
          STRING_RUN.test(chunk);
          const end = STRING_RUN.lastIndex;
          if (this.keepText && end > i) this.text += chunk.slice(i, end);
          i = end;
          if (i === n) break;
          const c = chunk.charCodeAt(i++);
          if (c === 0x22) this.endString();
          else if (c === 0x5c) this.token = ESCAPE;
          else this.fail('a control character must be escaped inside a string');
          break;
        }
        case ESCAPE: {
          const c = chunk[i++];
          if (c === 'u') {
            this.token = UNICODE;
            this.hex = 0;
            this.hexDigits = 0;
          } else {
            const escaped = ESCAPES[c];
            if (escaped === undefined) this.fail(`invalid escape \\${c} in a string`);
            if (this.keepText) this.text += escaped;
            this.token = STRING;
          }
          break;
        }
        case UNICODE: {
          const digit = parseInt(chunk[i++], 16);
          if (Number.isNaN(digit)) this.fail('invalid \\u escape in a string');
          this.hex = this.hex * 16 + digit;
          if (++this.hexDigits === 4) {
            if (this.keepText) this.text += String.fromCharCode(this.hex);
            this.token = STRING;
          }
          break;
        }
        case NUMBER: {
          const c = chunk.charCodeAt(i);
          if (this.stepNumber(c)) {
            i++;
          } else {
            this.text += chunk.slice(numberStart, i);
            this.endNumber();
          }
          break;
        }
        case LITERAL: {
          if (chunk[i] !== this.literal[this.literalAt]) this.fail(`invalid literal, expected ${this.literal}`);
          i++;
          if (++this.literalAt === this.literal.length) {
            this.token = NONE;
            this.scalarValue(this.literal === 'true' ? true : this.literal === 'false' ? false : null);
          }
          break;
        }
        default: {
          const c = chunk.charCodeAt(i);
          if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
            i++;
            break;
          }
          this.structural(chunk, i);
          if (this.token === NUMBER) {
            numberStart = i;
            this.text = '';
          }
          i++;
          if (this.expect === DONE) return i;
        }
      }
    }
    if (this.token === NUMBER) this.text += chunk.slice(numberStart, n);
    return -1;
  }

  /** The input is complete: finishes a trailing number and checks that the row is. */
  end(): void {
    if (this.token === NUMBER) this.endNumber();
    if (this.token !== NONE) this.fail('the input ends inside a string or literal');
    if (this.expect !== DONE) this.fail('the input ends before the JSON is complete');
  }

  /** The row just closed, checked against the rules; the index moves on to the next row. */
  row(): Row {
    const index = this.index;
    const id = checkId(fieldValue(this.id), index);
    const value = this.value;
    if (value.kind !== 'number') {
      const got = value.kind === 'missing' ? 'no value' : describeValue(fieldValue(value));
      throw new InvalidInputError(`Row ${index}: value must be an integer, got ${got}.`, index);
    }
    const row = { id, value: integerFromText(value.text, index) };
    this.index++;
    return row;
  }

  private structural(chunk: string, i: number): void {
    const c = chunk[i];
    switch (this.expect) {
      case VALUE:
      case VALUE_OR_CLOSE:
        if (c === ']' && this.expect === VALUE_OR_CLOSE) return this.close();
        return this.startValue(c);
      case KEY:
      case KEY_OR_CLOSE:
        if (c === '}' && this.expect === KEY_OR_CLOSE) return this.close();
        if (c !== '"') this.fail('expected a string key in an object');
        this.token = STRING;
        this.isKey = true;
        this.keepText = this.stack.length === 1;
        this.text = '';
        return;
      case COLON:
        if (c !== ':') this.fail("expected ':' after an object key");
        this.expect = VALUE;
        return;
      case COMMA_OR_CLOSE: {
        const inObject = this.stack[this.stack.length - 1];
        if (c === ',') {
          this.expect = inObject ? KEY : VALUE;
          return;
        }
        if (c === (inObject ? '}' : ']')) return this.close();
        return this.fail(`expected ',' or '${inObject ? '}' : ']'}'`);
      }
      default:
        return this.fail('unexpected text after the end of the JSON');
    }
  }

  private startValue(c: string): void {
    const depth = this.stack.length;
    if (depth === 0 && c !== '{') throw notAnObject(this.index);
    if (c === '{' || c === '[') {
      if (depth === 1) this.setField({ kind: 'other', value: c === '{' ? {} : [] });
      this.stack.push(c === '{');
      this.expect = c === '{' ? KEY_OR_CLOSE : VALUE_OR_CLOSE;
      return;
    }
    if (c === '"') {
      this.token = STRING;
      this.isKey = false;
      this.keepText = depth === 1 && (this.key === 'id' || this.key === 'value');
      this.text = '';
      return;
    }
    if (c === '-' || (c >= '0' && c <= '9')) {
      this.token = NUMBER;
      this.numberState = c === '-' ? N_MINUS : c === '0' ? N_ZERO : N_INT;
      return;
    }
    const literal = LITERALS[c];
    if (literal === undefined) this.fail(`unexpected character ${JSON.stringify(c)}`);
    this.token = LITERAL;
    this.literal = literal;
    this.literalAt = 1;
  }

  /** Advances the number grammar by one character; false when the character ends the number. */
  private stepNumber(c: number): boolean {
    const digit = c >= 0x30 && c <= 0x39;
    switch (this.numberState) {
      case N_MINUS:
        if (!digit) this.fail('a number needs digits after -');
        this.numberState = c === 0x30 ? N_ZERO : N_INT;
        return true;
      case N_ZERO:
      case N_INT:
        if (digit && this.numberState === N_INT) return true;
        if (c === 0x2e) this.numberState = N_DOT;
        else if (c === 0x65 || c === 0x45) this.numberState = N_E;
        else return false;
        return true;
      case N_DOT:
        if (!digit) this.fail('a number needs digits after the decimal point');
        this.numberState = N_FRACTION;
        return true;
      case N_FRACTION:
        if (digit) return true;
        if (c === 0x65 || c === 0x45) {
          this.numberState = N_E;
          return true;
        }
        return false;
      case N_E:
        if (c === 0x2b || c === 0x2d) {
          this.numberState = N_E_SIGN;
          return true;
        }
      // falls through: the exponent may start with a digit directly
      case N_E_SIGN:
        if (!digit) this.fail('a number needs digits in its exponent');
        this.numberState = N_EXPONENT;
        return true;
      default:
        return digit;
    }
  }

  private endNumber(): void {
    const state = this.numberState;
    if (state !== N_ZERO && state !== N_INT && state !== N_FRACTION && state !== N_EXPONENT) {
      this.fail('the input ends inside a number');
    }
    this.token = NONE;
    if (this.stack.length === 1) this.setField({ kind: 'number', text: this.text });
    this.text = '';
    this.valueDone();
  }

  private endString(): void {
    this.token = NONE;
    if (this.isKey) {
      if (this.keepText) this.key = this.text;
      this.text = '';
      this.expect = COLON;
      return;
    }
    if (this.stack.length === 1) this.setField({ kind: 'string', text: this.text });
    this.text = '';
    this.valueDone();
  }

  private scalarValue(value: boolean | null): void {
    if (this.stack.length === 1) this.setField({ kind: 'other', value });
    this.valueDone();
  }

  private setField(field: Field): void {
    if (this.key === 'id') this.id = field;
    else if (this.key === 'value') this.value = field;
  }

  private close(): void {
    this.stack.pop();
    this.valueDone();
  }

  private valueDone(): void {
    this.expect = this.stack.length === 0 ? DONE : COMMA_OR_CLOSE;
    if (this.stack.length === 1) this.key = null;
  }

  private fail(what: string): never {
    throw invalidJson(what, this.index);
  }
}

function fieldValue(field: Field): unknown {
  switch (field.kind) {
    case 'missing':
      return undefined;
    case 'string':
      return field.text;
    case 'number':
      return Number(field.text);
    default:
      return field.value;
  }
}

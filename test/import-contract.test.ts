import { createHash } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { applyChunk, begin, CheckpointError, checkpoint, importAll, parseRows, runInTransaction, sourceDigest, values } from '../src';
import { JsonItemSplitter } from '../src/import/json-items';
import { RowItems } from '../src/import/json-rows';
import { count, createTestDatabase, DRIVER, q, sql, type TestDatabase } from './support/database';

const MAX = Number.MAX_SAFE_INTEGER;

async function rejection(promise: Promise<unknown>): Promise<CheckpointError> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(CheckpointError);
    return error as CheckpointError;
  }
  return expect.fail('expected the call to reject');
}

function thrown(f: () => unknown): CheckpointError & { index?: number } {
  try {
    f();
  } catch (error) {
    expect(error).to.be.instanceOf(CheckpointError);
    return error as CheckpointError & { index?: number };
  }
  return expect.fail('expected the call to throw');
}

function expectInvalid(raw: string | Uint8Array, index: number | undefined): void {
  const error = thrown(() => parseRows(raw));
  expect(error.code).to.equal('INVALID_INPUT');
  expect(error.index).to.equal(index);
}

const json = (rows: unknown[]) => JSON.stringify(rows);

describe(`digest-guarded imports: the lab contract (${DRIVER})`, () => {
  let database: TestDatabase;
  let ds: DataSource;

  before(async () => {
    database = await createTestDatabase('import_contract');
    ds = await database.open();
  });

  after(async () => {
    await database?.drop();
  });

  /** Every stored import and item, to prove a refused call changed nothing. */
  async function snapshot(): Promise<unknown> {
    const imports = (await ds.query(`SELECT * FROM ${q('checkpoint_imports')} ORDER BY ${q('id')}`)) as Record<string, unknown>[];
    const items = (await ds.query(`SELECT * FROM ${q('checkpoint_import_items')} ORDER BY ${q('batch')}, ${q('id')}`)) as Record<
      string,
      unknown
    >[];
    return JSON.stringify({ imports, items });
  }

  function itemCount(batch: string): Promise<number> {
    return count(ds, sql(`SELECT COUNT(*) FROM ${q('checkpoint_import_items')} WHERE ${q('batch')} = ?`), [batch]);
  }

  describe('parseRows', () => {
    it('returns only id and value of each item, in order, from bytes or a string', () => {
      const raw = '[{"id":"a","value":1,"note":"x"},{"value":-2,"id":"b","nested":{"value":1.5,"id":3}},{"id":"c","value":0}]';
      const expected = [
        { id: 'a', value: 1 },
        { id: 'b', value: -2 },
        { id: 'c', value: 0 },
      ];
      expect(parseRows(raw)).to.deep.equal(expected);
      expect(parseRows(Buffer.from(raw))).to.deep.equal(expected);
      expect(parseRows(new Uint8Array(Buffer.from(raw)))).to.deep.equal(expected);
      expect(parseRows('[]')).to.deep.equal([]);
      expect(parseRows(' \n[ ]\r\n')).to.deep.equal([]);
    });

    it('accepts integers up to ±(2^53−1) and -0 as 0', () => {
      const rows = parseRows(
        json([
          { id: 'max', value: MAX },
          { id: 'min', value: -MAX },
        ]).replace('}]', '},{"id":"z","value":-0}]'),
      );
      expect(rows).to.deep.equal([
        { id: 'max', value: MAX },
        { id: 'min', value: -MAX },
        { id: 'z', value: 0 },
      ]);
      expect(Object.is(rows[2].value, 0)).to.equal(true);
    });

    it('accepts a leading UTF-8 BOM, and non-ASCII ids and escapes', () => {
      const body = '[{"id":"\\u00e9t\\u00e9 \\ud83d\\ude00","value":1},{"id":"日本","value":2}]';
      expect(parseRows(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(body)]))).to.deep.equal([
        { id: 'été 😀', value: 1 },
        { id: '日本', value: 2 },
      ]);
      expect(parseRows(`\ufeff${body}`)).to.have.length(2);
    });

    it('refuses a duplicate id with the index of the later occurrence', () => {
      expectInvalid(
        json([
          { id: 'a', value: 1 },
          { id: 'b', value: 2 },
          { id: 'c', value: 3 },
          { id: 'b', value: 4 },
        ]),
        3,
      );
    });

    it('refuses an empty, missing or non-string id', () => {
      expectInvalid(
        json([
          { id: 'a', value: 1 },
          { id: '', value: 2 },
        ]),
        1,
      );
      expectInvalid(json([{ value: 2 }]), 0);
      expectInvalid(
        json([
          { id: 'a', value: 1 },
          { id: 7, value: 2 },
        ]),
        1,
      );
      expectInvalid(json([{ id: null, value: 2 }]), 0);
      expectInvalid(json([{ id: true, value: 2 }]), 0);
      expectInvalid(json([{ id: ['a'], value: 2 }]), 0);
    });

    it('refuses a boolean, float-written, out-of-range, missing or non-number value', () => {
      expectInvalid(json([{ id: 'a', value: true }]), 0);
      expectInvalid(
        json([
          { id: 'a', value: 1 },
          { id: 'b', value: false },
        ]),
        1,
      );
      expectInvalid('[{"id":"a","value":1},{"id":"b","value":1.0}]', 1);
      expectInvalid('[{"id":"a","value":1e3}]', 0);
      expectInvalid('[{"id":"a","value":1E3}]', 0);
      expectInvalid('[{"id":"a","value":-2.5}]', 0);
      expectInvalid('[{"id":"a","value":10e-1}]', 0);
      expectInvalid('[{"id":"a","value":9007199254740992}]', 0);
      expectInvalid('[{"id":"a","value":-9007199254740992}]', 0);
      expectInvalid('[{"id":"a","value":123456789012345678901234567890}]', 0);
      expectInvalid(json([{ id: 'a' }]), 0);
      expectInvalid(json([{ id: 'a', value: '1' }]), 0);
      expectInvalid(json([{ id: 'a', value: null }]), 0);
      expectInvalid(json([{ id: 'a', value: [1] }]), 0);
    });

    it('refuses a top level that is not an array, without an index', () => {
      expectInvalid(json({ id: 'a', value: 1 } as unknown as unknown[]), undefined);
      expectInvalid('1', undefined);
      expectInvalid('"rows"', undefined);
      expectInvalid('null', undefined);
    });

    it('refuses an item that is not an object, with its index', () => {
      expectInvalid('[{"id":"a","value":1},1]', 1);
      expectInvalid('[["a",1]]', 0);
      expectInvalid('[null]', 0);
      expectInvalid('[{"id":"a","value":1},{"id":"b","value":2},"c"]', 2);
    });

    it('refuses invalid JSON', () => {
      for (const raw of [
        '',
        '   ',
        '[',
        '[{"id":"a","value":1}',
        '[{"id":"a","value":1},]',
        "[{'id':'a','value':1}]",
        '[{"id":"a","value":NaN}]',
        '[{"id":"a","value":01}]',
        '[{"id":"a","value":1}] []',
        '[{"id":"a" "value":1}]',
        '[{"id":"a\tb","value":1}]',
        '[{"id":"\\x41","value":1}]',
        '[{"id":"a","value":+1}]',
        '[{"id":"a","value":1}]\u00a0',
      ]) {
        const error = thrown(() => parseRows(raw));
        expect(error.code, raw).to.equal('INVALID_INPUT');
      }
      // Inside an item, the item's index is given.
      expectInvalid('[{"id":"a","value":1},{"id":"b","value":2,}]', 1);
    });

    it('refuses invalid UTF-8, with the index of the item holding it', () => {
      const item = (bytes: number[]) =>
        Buffer.concat([Buffer.from('[{"id":"a","value":1},{"id":"'), Buffer.from(bytes), Buffer.from('","value":2}]')]);
      expectInvalid(item([0xff]), 1); // never valid
      expectInvalid(item([0xc0, 0x80]), 1); // overlong NUL
      expectInvalid(item([0xed, 0xa0, 0x80]), 1); // an encoded surrogate
      expectInvalid(item([0xe2, 0x82]), 1); // truncated sequence
      expectInvalid(Buffer.concat([Buffer.from('[{"id":"a","value":1}]'), Buffer.from([0xe2, 0x82])]), undefined);
      expect(parseRows(item([0xe2, 0x82, 0xac]))[1].id).to.equal('€');
    });

    it('agrees with JSON.parse on what is JSON, and tells floats by their text (property)', () => {
      const reference = (text: string): { id: string; value: number }[] | 'invalid' | 'float' => {
        let parsed: unknown;
        try {
          // parseRows reads a string as its UTF-8 bytes, where a lone surrogate becomes U+FFFD.
          parsed = JSON.parse(Buffer.from(text, 'utf8').toString('utf8'));
        } catch {
          return 'invalid';
        }
        if (!Array.isArray(parsed)) return 'invalid';
        const rows: { id: string; value: number }[] = [];
        const seen = new Set<string>();
        for (const item of parsed as unknown[]) {
          if (typeof item !== 'object' || item === null || Array.isArray(item)) return 'invalid';
          const { id, value } = item as { id: unknown; value: unknown };
          if (typeof id !== 'string' || id === '' || seen.has(id)) return 'invalid';
          if (typeof value !== 'number' || !Number.isSafeInteger(value)) return 'invalid';
          seen.add(id);
          rows.push({ id, value: value + 0 });
        }
        return rows;
      };
      const row = fc.record(
        {
          id: fc.oneof(fc.string({ unit: 'binary', maxLength: 6 }), fc.integer(), fc.constant('')),
          value: fc.oneof(fc.integer(), fc.double(), fc.boolean(), fc.constant(MAX), fc.string({ maxLength: 2 })),
          other: fc.jsonValue({ maxDepth: 2 }),
        },
        { requiredKeys: [] },
      );
      const document = fc.oneof(
        fc.array(row, { maxLength: 5 }).map((rows) => JSON.stringify(rows, null, rows.length % 2 ? 1 : undefined)),
        fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
      );
      // Mutations: cut, duplicate or replace one character, so malformed JSON comes up often.
      const mutated = fc
        .tuple(document, fc.nat(), fc.constantFrom('', '.0', 'e1', ',', ']', '"', '\\', ' ', 'x', '1.0', '}'), fc.boolean())
        .map(([text, at, insert, cut]) => {
          const position = text.length === 0 ? 0 : at % text.length;
          return text.slice(0, position) + insert + text.slice(position + (cut ? 1 : 0));
        });
      fc.assert(
        fc.property(fc.oneof(document, mutated), (text) => {
          const expected = reference(text);
          let actual: { id: string; value: number }[] | CheckpointError;
          try {
            actual = parseRows(text);
          } catch (error) {
            expect(error).to.be.instanceOf(CheckpointError);
            actual = error as CheckpointError;
          }
          if (expected === 'invalid') {
            expect(actual).to.be.instanceOf(CheckpointError);
            expect((actual as CheckpointError).code).to.equal('INVALID_INPUT');
          } else if (actual instanceof CheckpointError) {
            // Accepted by JSON.parse as integers, refused only for a number written as a float.
            expect(actual.code).to.equal('INVALID_INPUT');
            expect(/[0-9][.eE]/.test(text), text).to.equal(true);
          } else {
            expect(actual).to.deep.equal(expected);
          }
        }),
        { numRuns: 3000 },
      );
    });

    it('reads the same rows and errors however the text is split into chunks (property)', () => {
      const scan = (pieces: string[]) => {
        const splitter = new JsonItemSplitter('json', new RowItems('json'));
        try {
          for (const piece of pieces) splitter.write(piece);
          splitter.end();
          return splitter.take().items;
        } catch (error) {
          return { code: (error as CheckpointError).code, index: (error as { index?: number }).index };
        }
      };
      const text = fc.oneof(
        fc
          .array(fc.record({ id: fc.string({ minLength: 1, maxLength: 5 }), value: fc.oneof(fc.integer(), fc.double()) }), { maxLength: 6 })
          .map((rows) => JSON.stringify(rows).replace(/"value":(-?\d+)}/g, (m, n: string) => (n.length % 3 === 0 ? `"value":${n}.0}` : m))),
        fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
        fc.string({ maxLength: 30 }),
      );
      fc.assert(
        fc.property(text, fc.array(fc.nat(), { maxLength: 6 }), (source, cuts) => {
          const points = [...new Set(cuts.map((cut) => (source.length === 0 ? 0 : cut % (source.length + 1))))].sort((a, b) => a - b);
          const pieces: string[] = [];
          let from = 0;
          for (const point of points) {
            pieces.push(source.slice(from, point));
            from = point;
          }
          pieces.push(source.slice(from));
          expect(scan(pieces)).to.deep.equal(scan([source]));
        }),
        { numRuns: 2000 },
      );
    });
  });

  describe('sourceDigest', () => {
    it('is the SHA-256 hex of the raw bytes, a string taken as UTF-8, without normalisation', () => {
      const raw = '[{"id":"é","value":1}]';
      const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
      expect(sourceDigest(raw)).to.equal(sha(Buffer.from(raw, 'utf8')));
      expect(sourceDigest(Buffer.from(raw))).to.equal(sourceDigest(raw));
      expect(sourceDigest(new Uint8Array(Buffer.from(raw)))).to.equal(sourceDigest(raw));
      expect(sourceDigest(raw)).to.match(/^[0-9a-f]{64}$/);
      // Same rows, other bytes: another source.
      expect(sourceDigest('[{"id":"é", "value":1}]')).not.to.equal(sourceDigest(raw));
      const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(raw)]);
      expect(sourceDigest(withBom)).to.equal(sha(withBom));
      expect(sourceDigest(withBom)).not.to.equal(sourceDigest(raw));
      // A view into a larger buffer digests only its own bytes.
      const big = Buffer.from(`xx${raw}yy`);
      expect(sourceDigest(big.subarray(2, 2 + Buffer.byteLength(raw)))).to.equal(sourceDigest(raw));
    });
  });

  describe('begin', () => {
    it('stores next_index 0 for a new batch, returns the committed next_index for the same digest', async () => {
      expect(await begin(ds, 'begin-new', 'd1')).to.equal(0);
      expect(await checkpoint(ds, 'begin-new')).to.equal(0);
      await applyChunk(ds, 'begin-new', 0, [{ id: 'a', value: 1 }]);
      expect(await begin(ds, 'begin-new', 'd1')).to.equal(1);
    });

    it('refuses a different digest with FINGERPRINT_MISMATCH and changes nothing', async () => {
      await begin(ds, 'begin-other', 'd1');
      await applyChunk(ds, 'begin-other', 0, [{ id: 'a', value: 1 }]);
      const before = await snapshot();
      const error = await rejection(begin(ds, 'begin-other', 'd2'));
      expect(error.code).to.equal('FINGERPRINT_MISMATCH');
      expect(await snapshot()).to.equal(before);
      expect(await begin(ds, 'begin-other', 'd1')).to.equal(1);
    });
  });

  describe('applyChunk', () => {
    it('inserts the rows, stores next_index = start + rows.length and returns it', async () => {
      await begin(ds, 'apply', 'd');
      expect(
        await applyChunk(ds, 'apply', 0, [
          { id: 'a', value: 1 },
          { id: 'b', value: 2 },
        ]),
      ).to.equal(2);
      expect(await applyChunk(ds, 'apply', 2, [{ id: 'c', value: 3, extra: true } as never])).to.equal(3);
      expect(await checkpoint(ds, 'apply')).to.equal(3);
      expect(await values(ds, 'apply')).to.deep.equal([
        ['a', 1],
        ['b', 2],
        ['c', 3],
      ]);
    });

    it('refuses a start other than the committed next_index, and an unknown batch, with CURSOR_MISMATCH', async () => {
      await begin(ds, 'cursor', 'd');
      await applyChunk(ds, 'cursor', 0, [
        { id: 'a', value: 1 },
        { id: 'b', value: 2 },
      ]);
      const before = await snapshot();
      for (const start of [0, 1, 3]) {
        const error = await rejection(applyChunk(ds, 'cursor', start, [{ id: `x${start}`, value: 1 }]));
        expect(error.code).to.equal('CURSOR_MISMATCH');
      }
      const unknown = await rejection(applyChunk(ds, 'no-such-batch', 0, [{ id: 'a', value: 1 }]));
      expect(unknown.code).to.equal('CURSOR_MISMATCH');
      expect(await snapshot()).to.equal(before);
    });

    it('calls fault with the global index after each insert', async () => {
      await begin(ds, 'fault-order', 'd');
      await applyChunk(ds, 'fault-order', 0, [
        { id: 'a', value: 1 },
        { id: 'b', value: 2 },
      ]);
      const calls: number[] = [];
      await applyChunk(
        ds,
        'fault-order',
        2,
        [
          { id: 'c', value: 3 },
          { id: 'd', value: 4 },
          { id: 'e', value: 5 },
        ],
        (index) => {
          calls.push(index);
        },
      );
      expect(calls).to.deep.equal([2, 3, 4]);
    });

    it('rolls the whole chunk back when fault throws, and re-raises the same error', async () => {
      await begin(ds, 'fault-roll', 'd');
      await applyChunk(ds, 'fault-roll', 0, [{ id: 'a', value: 1 }]);
      const before = await snapshot();
      const failure = new Error('fault at 2');
      const calls: number[] = [];
      let caught: unknown;
      try {
        await applyChunk(
          ds,
          'fault-roll',
          1,
          [
            { id: 'b', value: 2 },
            { id: 'c', value: 3 },
            { id: 'd', value: 4 },
          ],
          (index) => {
            calls.push(index);
            if (index === 2) throw failure;
          },
        );
      } catch (error) {
        caught = error;
      }
      expect(caught).to.equal(failure);
      expect(calls).to.deep.equal([1, 2]); // the row of index 1 was inserted before the fault at 2
      expect(await snapshot()).to.equal(before);
      expect(await checkpoint(ds, 'fault-roll')).to.equal(1);
      expect(await itemCount('fault-roll')).to.equal(1);
    });

    it('refuses an id already stored in the batch with INVALID_INPUT, keeping nothing of the chunk', async () => {
      await begin(ds, 'stored-id', 'd');
      await applyChunk(ds, 'stored-id', 0, [
        { id: 'a', value: 1 },
        { id: 'b', value: 2 },
      ]);
      const before = await snapshot();
      const error = (await rejection(
        applyChunk(ds, 'stored-id', 2, [
          { id: 'c', value: 3 },
          { id: 'a', value: 4 },
        ]),
      )) as CheckpointError & { index?: number };
      expect(error.code).to.equal('INVALID_INPUT');
      expect(error.index).to.equal(3);
      const withFault = await rejection(
        applyChunk(
          ds,
          'stored-id',
          2,
          [
            { id: 'c', value: 3 },
            { id: 'b', value: 4 },
          ],
          () => undefined,
        ),
      );
      expect(withFault.code).to.equal('INVALID_INPUT');
      expect(await snapshot()).to.equal(before);
    });

    it('checks the rows like parseRows, numbering them from start', async () => {
      await begin(ds, 'rows-checked', 'd');
      await applyChunk(ds, 'rows-checked', 0, [{ id: 'a', value: 1 }]);
      const before = await snapshot();
      const cases: [unknown[], number][] = [
        [[{ id: '', value: 1 }], 1],
        [
          [
            { id: 'b', value: 1 },
            { id: 5, value: 1 },
          ],
          2,
        ],
        [[{ value: 1 }], 1],
        [[{ id: 'b', value: true }], 1],
        [[{ id: 'b', value: 1.5 }], 1],
        [[{ id: 'b', value: MAX + 1 }], 1],
        [[{ id: 'b', value: '1' }], 1],
        [
          [
            { id: 'b', value: 1 },
            { id: 'b', value: 2 },
          ],
          2,
        ],
        [[null], 1],
      ];
      for (const [rows, index] of cases) {
        const error = (await rejection(applyChunk(ds, 'rows-checked', 1, rows as never))) as CheckpointError & { index?: number };
        expect(error.code, JSON.stringify(rows)).to.equal('INVALID_INPUT');
        expect(error.index, JSON.stringify(rows)).to.equal(index);
      }
      expect((await rejection(applyChunk(ds, 'rows-checked', 1, 'rows' as never))).code).to.equal('INVALID_ARGUMENT');
      expect((await rejection(applyChunk(ds, 'rows-checked', -1, []))).code).to.equal('INVALID_ARGUMENT');
      expect(await snapshot()).to.equal(before);
    });

    it('lets exactly one of two concurrent calls at the same start apply its chunk', async () => {
      await begin(ds, 'race', 'd');
      const outcomes = await Promise.allSettled([
        applyChunk(ds, 'race', 0, [
          { id: 'a', value: 1 },
          { id: 'b', value: 2 },
        ]),
        applyChunk(ds, 'race', 0, [
          { id: 'c', value: 3 },
          { id: 'd', value: 4 },
        ]),
      ]);
      expect(outcomes.filter((o) => o.status === 'fulfilled')).to.have.length(1);
      const failed = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
      expect((failed.reason as CheckpointError).code).to.equal('CURSOR_MISMATCH');
      expect(await itemCount('race')).to.equal(2);
    });

    it('joins the caller’s transaction: it rolls back with the caller, and its own failure leaves the caller usable', async () => {
      await begin(ds, 'joined', 'd');
      const failure = new Error('caller fails');
      let caught: unknown;
      try {
        await runInTransaction(ds, async (tx) => {
          expect(await applyChunk(tx, 'joined', 0, [{ id: 'a', value: 1 }])).to.equal(1);
          throw failure;
        });
      } catch (error) {
        caught = error;
      }
      expect(caught).to.equal(failure);
      expect(await checkpoint(ds, 'joined')).to.equal(0);
      expect(await itemCount('joined')).to.equal(0);

      await runInTransaction(ds, async (tx) => {
        const error = await rejection(applyChunk(tx, 'joined', 5, [{ id: 'a', value: 1 }]));
        expect(error.code).to.equal('CURSOR_MISMATCH');
        await applyChunk(tx, 'joined', 0, [{ id: 'a', value: 1 }], (index) => {
          expect(index).to.equal(0);
        });
      });
      expect(await checkpoint(ds, 'joined')).to.equal(1);
    });
  });

  describe('checkpoint and values', () => {
    it('checkpoint is null for an unknown batch', async () => {
      expect(await checkpoint(ds, 'never-begun')).to.equal(null);
    });

    it('values are that batch’s pairs only, ordered by Unicode code point, values as numbers', async () => {
      const ids = ['B', 'a', 'é', 'Z', '10', '9', '😀', '\uffff'];
      await importAll(ds, 'order', json(ids.map((id, i) => ({ id, value: i === 0 ? MAX : -i }))), { size: 3 });
      await importAll(
        ds,
        'order-other',
        json([
          { id: 'a', value: 100 },
          { id: 'zz', value: 101 },
        ]),
      );
      expect(await values(ds, 'order')).to.deep.equal([
        ['10', -4],
        ['9', -5],
        ['B', MAX],
        ['Z', -3],
        ['a', -1],
        ['é', -2],
        ['\uffff', -7],
        ['😀', -6],
      ]);
      expect(await values(ds, 'order-other')).to.deep.equal([
        ['a', 100],
        ['zz', 101],
      ]);
      expect(await values(ds, 'never-begun')).to.deep.equal([]);
    });
  });

  describe('importAll', () => {
    it('validates size: a positive integer, not a boolean or string (INVALID_ARGUMENT, nothing begun)', async () => {
      const raw = json([{ id: 'a', value: 1 }]);
      for (const size of [0, -1, 1.5, true, '2', NaN, Infinity, null]) {
        const error = await rejection(importAll(ds, 'bad-size', raw, { size: size as number }));
        expect(error.code, String(size)).to.equal('INVALID_ARGUMENT');
      }
      expect(await checkpoint(ds, 'bad-size')).to.equal(null);
    });

    it('applies 2 rows per chunk by default and returns the final checkpoint', async () => {
      const raw = json([1, 2, 3, 4, 5].map((n) => ({ id: `r${n}`, value: n })));
      const failure = new Error('stop at the third chunk');
      const error = await importAll(ds, 'default-size', raw, {
        fault: (index) => {
          if (index === 4) throw failure;
        },
      }).catch((e: unknown) => e);
      expect(error).to.equal(failure);
      expect(await checkpoint(ds, 'default-size')).to.equal(4);
      expect(await importAll(ds, 'default-size', raw)).to.equal(5);
      expect(await importAll(ds, 'default-size', raw)).to.equal(5);
    });

    it('the lab’s scenario: a fault in the second chunk keeps the first; the rerun resumes there and ends with every row once', async () => {
      const rows = [1, 2, 3, 4, 5, 6, 7].map((n) => ({ id: `id-${n}`, value: n * 10 }));
      const raw = Buffer.from(json(rows));
      const failure = new Error('fault in the second chunk');
      const seen: number[] = [];
      let caught: unknown;
      try {
        await importAll(ds, 'lab', raw, {
          size: 2,
          fault: (index) => {
            seen.push(index);
            if (index === 3) throw failure;
          },
        });
      } catch (error) {
        caught = error;
      }
      expect(caught).to.equal(failure);
      expect(seen).to.deep.equal([0, 1, 2, 3]);
      expect(await checkpoint(ds, 'lab')).to.equal(2);
      expect(await values(ds, 'lab')).to.deep.equal([
        ['id-1', 10],
        ['id-2', 20],
      ]);

      const resumed: number[] = [];
      expect(await importAll(ds, 'lab', raw, { size: 2, fault: (index) => void resumed.push(index) })).to.equal(7);
      expect(resumed).to.deep.equal([2, 3, 4, 5, 6]);
      expect(await values(ds, 'lab')).to.deep.equal(rows.map((row) => [row.id, row.value]));
      expect(await itemCount('lab')).to.equal(7);
    });

    it('refuses another source under the same batch with FINGERPRINT_MISMATCH, changing nothing', async () => {
      const raw = json([
        { id: 'a', value: 1 },
        { id: 'b', value: 2 },
        { id: 'c', value: 3 },
      ]);
      await importAll(ds, 'guarded', raw, {
        size: 2,
        fault: (i) => {
          if (i === 2) throw new Error('stop');
        },
      }).catch(() => undefined);
      expect(await checkpoint(ds, 'guarded')).to.equal(2);
      const before = await snapshot();
      // Whitespace alone makes another source: the digest is over the bytes.
      const error = await rejection(importAll(ds, 'guarded', raw.replace(',', ', ')));
      expect(error.code).to.equal('FINGERPRINT_MISMATCH');
      expect(await snapshot()).to.equal(before);
    });

    it('refuses invalid input before beginning anything', async () => {
      const before = await snapshot();
      const error = (await rejection(
        importAll(
          ds,
          'invalid',
          json([
            { id: 'a', value: 1 },
            { id: 'a', value: 2 },
          ]),
        ),
      )) as CheckpointError & {
        index?: number;
      };
      expect(error.code).to.equal('INVALID_INPUT');
      expect(error.index).to.equal(1);
      expect(await snapshot()).to.equal(before);
      expect(await checkpoint(ds, 'invalid')).to.equal(null);
    });
  });
});

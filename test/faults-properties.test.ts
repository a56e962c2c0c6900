// Property-based fault tests (fast-check): random sources, batch sizes, failure points and restart
// sequences for eachBatch against a model (an array and a position); random invalid JSON, NDJSON
// and CSV files (INVALID_INPUT, database unchanged byte for byte); random valid files imported
// under injected faults and reruns (every row exactly once). FAULT_PROPERTY_RUNS sets the number of
// generated cases per property (default 1000).
import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataSource, type EntityManager } from 'typeorm';
import {
  checkpoint,
  CheckpointError,
  checkpointEntities,
  checkpointMigrations,
  dataSourceOptionsFromUrl,
  eachBatch,
  type EachBatchResult,
  importFile,
  type Json,
  type Page,
  runInTransaction,
  status,
  values,
} from '../src';
import { createTestDatabase, DRIVER, sql, type TestDatabase } from './support/database';
import { expectNoLeaks } from './support/fault-checks';

const RUNS = Number(process.env.FAULT_PROPERTY_RUNS ?? 1000);
const TIMEOUT = 170_000;

/** SQLite: one in-memory database per property (cheap); elsewhere a fresh test database. */
async function openDatabase(label: string): Promise<{ ds: DataSource; close(): Promise<void> }> {
  if (DRIVER === 'sqlite') {
    const ds = new DataSource({
      ...dataSourceOptionsFromUrl('sqlite::memory:'),
      entities: checkpointEntities,
      migrations: checkpointMigrations,
    });
    await ds.initialize();
    await ds.runMigrations();
    return { ds, close: () => ds.destroy() };
  }
  const database: TestDatabase = await createTestDatabase(label);
  const ds = await database.open();
  return { ds, close: () => database.drop() };
}

/** An error a user callback throws on purpose: it must come back as this very object. */
class Injected extends Error {}

// ---------------------------------------------------------------------------------------------
// eachBatch against a model

type Mode = 'own' | 'joined-commit' | 'joined-rollback';
type BatchFault = { at: number; kind: 'handler-before-write' | 'handler-after-write' | 'source' };
interface RunPlan {
  limit: number;
  mode: Mode;
  fault?: BatchFault;
  /** Abort after this many committed batches of the run (0: the signal is aborted before the call). */
  stopAfter?: number;
}
interface JobModel {
  exists: boolean;
  done: boolean;
  cursor: Json;
  batches: number;
  items: number;
}

const runPlan: fc.Arbitrary<RunPlan> = fc.record(
  {
    limit: fc.integer({ min: 1, max: 7 }),
    mode: fc.constantFrom<Mode>('own', 'own', 'joined-commit', 'joined-rollback'),
    fault: fc.record({
      at: fc.nat({ max: 5 }),
      kind: fc.constantFrom<BatchFault['kind']>('handler-before-write', 'handler-after-write', 'source'),
    }),
    stopAfter: fc.nat({ max: 5 }),
  },
  { requiredKeys: ['limit', 'mode'] },
);

/** What one run does to the job, by the rules of the spec; `failed` when the injected fault fires. */
function modelRun(
  data: number[],
  endsWithEmptyPage: boolean,
  plan: RunPlan,
  before: JobModel,
): { job: JobModel; result?: EachBatchResult; failed: boolean } {
  if (plan.stopAfter === 0) {
    const done = before.exists && before.done;
    return {
      job: before,
      // A call stopped by its signal says so; a finished job's call ran to its natural end.
      result: { batches: 0, items: 0, done, cursor: before.exists ? before.cursor : null, ...(done ? {} : { stopped: 'signal' as const }) },
      failed: false,
    };
  }
  const job: JobModel = { ...before, exists: true };
  if (job.done) return { job, result: { batches: 0, items: 0, done: true, cursor: job.cursor }, failed: false };
  const run = { batches: 0, items: 0 };
  for (let round = 0; ; round++) {
    const failsHere = plan.fault?.at === round;
    if (failsHere && plan.fault!.kind === 'source') return { job, failed: true };
    const page = pageOf(data, endsWithEmptyPage, job.cursor, plan.limit);
    if (page.items.length === 0) {
      job.done = true;
      return { job, result: { ...run, done: true, cursor: job.cursor }, failed: false };
    }
    if (failsHere) return { job, failed: true };
    job.cursor = page.next;
    job.batches++;
    job.items += page.items.length;
    run.batches++;
    run.items += page.items.length;
    if (page.next === null) {
      job.done = true;
      return { job, result: { ...run, done: true, cursor: null }, failed: false };
    }
    if (plan.stopAfter === run.batches)
      return { job, result: { ...run, done: false, cursor: job.cursor, stopped: 'signal' }, failed: false };
  }
}

/** The source: the cursor is the index of the next item; the end is `next: null` or an empty page. */
function pageOf(data: number[], endsWithEmptyPage: boolean, cursor: Json, limit: number): Page<number> {
  const start = (cursor as number | null) ?? 0;
  const end = Math.min(data.length, start + limit);
  const items = data.slice(start, end);
  if (endsWithEmptyPage) return { items, next: items.length === 0 ? null : end };
  return { items, next: end >= data.length ? null : end };
}

// ---------------------------------------------------------------------------------------------
// import files

type Format = 'json' | 'ndjson' | 'csv';
interface Row {
  id: string;
  value: number;
}

// Characters that need quoting or escaping somewhere (no U+0000: the built-in table refuses it).
const idChar = fc.constantFrom('a', 'b', 'Z', '7', ',', '"', "'", ' ', '\\', ':', '?', 'é', '𝄞', '\n', '\r', '\t', ';', '{');
const rowsArbitrary: fc.Arbitrary<Row[]> = fc.uniqueArray(
  fc.record({
    id: fc.string({ unit: idChar, minLength: 1, maxLength: 6 }),
    value: fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.constantFrom(Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 0)),
  }),
  { selector: (row) => row.id, maxLength: 10 },
);

interface Layout {
  bom: boolean;
  crlf: boolean;
  /** NDJSON: blank lines before these rows; CSV: an extra column; JSON: extra keys and spacing. */
  extras: boolean[];
  extraFirst: boolean;
  quoteAll: boolean;
  trailingNewline: boolean;
}
const layoutArbitrary: fc.Arbitrary<Layout> = fc.record({
  bom: fc.boolean(),
  crlf: fc.boolean(),
  extras: fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
  extraFirst: fc.boolean(),
  quoteAll: fc.boolean(),
  trailingNewline: fc.boolean(),
});

function csvField(text: string, quoteAll: boolean): string {
  return quoteAll || /[",\r\n]/.test(text) || text === '' ? `"${text.replace(/"/g, '""')}"` : text;
}

/** The items of a file as text pieces, so a corruption can replace or insert one. */
function itemTexts(format: Format, rows: Row[], layout: Layout): string[] {
  return rows.map((row, i) => {
    const extra = layout.extras[i % layout.extras.length];
    if (format === 'csv') {
      const fields = [csvField(row.id, layout.quoteAll), String(row.value)];
      return (extra ? [...fields, csvField('x,"y"', layout.quoteAll)] : fields).join(',');
    }
    const object = extra ? { note: [1, { deep: 'x' }], id: row.id, value: row.value } : { id: row.id, value: row.value };
    return JSON.stringify(object, null, format === 'json' && extra ? 1 : undefined).replace(/\n/g, format === 'json' ? '\n' : '');
  });
}

function fileText(format: Format, items: string[], layout: Layout): string {
  const newline = layout.crlf ? '\r\n' : '\n';
  const bom = layout.bom ? '\uFEFF' : '';
  if (format === 'json')
    return `${bom}${layout.extraFirst ? ' \n' : ''}[${items.join(layout.crlf ? ',\r\n ' : ',')}]${layout.trailingNewline ? newline : ''}`;
  if (format === 'ndjson') {
    const lines = items.flatMap((item, i) => (layout.extras[i % layout.extras.length] ? ['', item] : [item]));
    return bom + lines.join(newline) + (layout.trailingNewline ? newline : '');
  }
  const header = ['id', 'value', ...(layout.extras.some(Boolean) ? ['extra'] : [])].join(',');
  return bom + [header, ...items].join(newline) + (layout.trailingNewline ? newline : '');
}

// Items that break the rules, per format (the id `bad` never comes from idChar's alphabet: no 'd').
const BAD_JSON_ITEMS = [
  '{"id":"bad","value":1.5}',
  '{"id":"bad","value":1.0}',
  '{"id":"bad","value":1e3}',
  '{"id":"bad","value":"5"}',
  '{"id":"bad","value":true}',
  '{"id":"bad","value":null}',
  '{"id":"bad"}',
  '{"value":1}',
  '{"id":5,"value":1}',
  '{"id":"","value":1}',
  '{"id":null,"value":1}',
  '5',
  '"bad"',
  '[1]',
  'null',
  '{"id":"bad","value":9007199254740992}',
  '{"id":"bad","value":-9007199254740992}',
  '{"id":"bad","value":[1]}',
  '{"id":["bad"],"value":1}',
];
const BAD_CSV_ITEMS = [
  'bad,1.5',
  'bad,abc',
  'bad,',
  'bad,+1',
  'bad, 1',
  'bad,1e3',
  'bad,9007199254740992',
  'bad,-9007199254740992',
  '"",1',
  'bad,0x10',
  'bad,--1',
];
const JSON_SYNTAX_ERRORS: ((text: string) => string)[] = [
  (text) => text.replace(/\][\r\n]*$/, ''), // unterminated
  (text) => text.replace(/\]([\r\n]*)$/, ',]$1'), // trailing comma
  (text) => `${text}x`, // garbage after the array
  (text) => `${text}]`,
  () => '{}',
  () => '1',
  () => '',
  () => '{"id":"bad","value":1}',
];
const NDJSON_SYNTAX_LINES = [
  '{"id":"bad","value":1',
  '{"id":"bad","value":1}}',
  '{"id":"bad","value":1}{"id":"bae","value":2}',
  '{id:"bad",value:1}',
  "{'id':'bad','value':1}",
  '[]',
];

type Corruption =
  | { kind: 'bad-item'; at: number; pick: number }
  | { kind: 'duplicate'; at: number; of: number }
  | { kind: 'syntax'; pick: number; at: number }
  | { kind: 'invalid-utf8'; at: number }
  | { kind: 'csv-header'; pick: number };

const corruptionArbitrary: fc.Arbitrary<Corruption> = fc.oneof(
  fc.record({ kind: fc.constant('bad-item' as const), at: fc.nat({ max: 10 }), pick: fc.nat({ max: 100 }) }),
  fc.record({ kind: fc.constant('duplicate' as const), at: fc.nat({ max: 10 }), of: fc.nat({ max: 10 }) }),
  fc.record({ kind: fc.constant('syntax' as const), pick: fc.nat({ max: 100 }), at: fc.nat({ max: 10 }) }),
  fc.record({ kind: fc.constant('invalid-utf8' as const), at: fc.nat({ max: 10 }) }),
  fc.record({ kind: fc.constant('csv-header' as const), pick: fc.nat({ max: 100 }) }),
);

/** An invalid file made from valid rows, and the index the error must carry (undefined: not checked). */
function invalidFile(format: Format, rows: Row[], layout: Layout, corruption: Corruption): { bytes: Buffer; index?: number } {
  const items = itemTexts(format, rows, layout);
  const text = () => fileText(format, items, layout);
  switch (corruption.kind) {
    case 'bad-item': {
      const at = corruption.at % (items.length + 1);
      const bad =
        format === 'csv'
          ? BAD_CSV_ITEMS
          : BAD_JSON_ITEMS.filter((item) => format === 'json' || item.startsWith('{') || item === '5' || item === 'null');
      items.splice(at, 0, bad[corruption.pick % bad.length]);
      return { bytes: Buffer.from(text()), index: at };
    }
    case 'duplicate': {
      if (rows.length === 0) return invalidFile(format, rows, layout, { kind: 'bad-item', at: 0, pick: corruption.of });
      const of = corruption.of % rows.length;
      const at = of + 1 + (corruption.at % (items.length - of));
      items.splice(at, 0, itemTexts(format, [{ id: rows[of].id, value: 1 }], layout)[0]);
      return { bytes: Buffer.from(text()), index: at };
    }
    case 'syntax': {
      if (format === 'json') return { bytes: Buffer.from(JSON_SYNTAX_ERRORS[corruption.pick % JSON_SYNTAX_ERRORS.length](text())) };
      if (format === 'ndjson') {
        items.splice(corruption.at % (items.length + 1), 0, NDJSON_SYNTAX_LINES[corruption.pick % NDJSON_SYNTAX_LINES.length]);
        return { bytes: Buffer.from(text()) };
      }
      // An unbalanced quote: the record never ends.
      items.splice(corruption.at % (items.length + 1), 0, '"bad,1');
      return { bytes: Buffer.from(text()) };
    }
    case 'invalid-utf8': {
      const at = corruption.at % (items.length + 1);
      items.splice(at, 0, format === 'csv' ? 'b\u0001d,1' : '{"id":"b\u0001d","value":1}');
      // The placeholder character becomes a byte that is never valid UTF-8.
      const bytes = Buffer.from(text());
      bytes[bytes.indexOf(0x01)] = 0xff;
      return { bytes };
    }
    case 'csv-header': {
      if (format !== 'csv') return invalidFile(format, rows, layout, { kind: 'syntax', pick: corruption.pick, at: 0 });
      const headers = ['ID,value', 'id,Value', 'id ,value', 'id', 'value', 'id,value,id', 'id,value,value', 'identifier,value', ''];
      const header = headers[corruption.pick % headers.length];
      const body = fileText(format, items, layout).replace(/^(\uFEFF?)[^\r\n]*/, `$1${header}`);
      return { bytes: Buffer.from(header === '' ? '' : body) };
    }
  }
}

type ImportFault = { at: number; kind: 'handler-before-write' | 'handler-after-write' | 'progress-throws' | 'abort' };
interface ImportRun {
  size: number;
  fault?: ImportFault;
  /** The file is replaced by other bytes (same rows, or one row more) for this run, then restored. */
  changed?: 'bytes' | 'rows';
}

const CHECKPOINT_TABLES: [string, string][] = [
  ['checkpoint_jobs', 'name'],
  ['checkpoint_imports', 'id'],
  ['checkpoint_import_items', 'batch, id'],
  ['file_checkpoints', 'file_url'],
  ['prop_rows', 'batch, id'],
];

/** Every checkpoint table (and the handler's table), row by row, as text. */
async function dump(ds: DataSource): Promise<string> {
  const tables: Record<string, unknown> = {};
  for (const [table, order] of CHECKPOINT_TABLES) tables[table] = await ds.query(`SELECT * FROM ${table} ORDER BY ${order}`);
  return JSON.stringify(tables);
}

/** Everything stored for one import batch, as text. */
async function batchState(ds: DataSource, batch: string): Promise<string> {
  const state: unknown[] = [];
  for (const [table, column] of [
    ['checkpoint_imports', 'id'],
    ['checkpoint_import_items', 'batch'],
    ['prop_rows', 'batch'],
  ]) {
    state.push(await ds.query(sql(`SELECT * FROM ${table} WHERE ${column} = ? ORDER BY ${column === 'id' ? 'id' : 'id, value'}`), [batch]));
  }
  return JSON.stringify(state);
}

async function storedRows(ds: DataSource, batch: string, builtIn: boolean): Promise<[string, number][]> {
  if (builtIn) return values(ds, batch);
  const rows = (await ds.query(sql('SELECT id, value FROM prop_rows WHERE batch = ?'), [batch])) as {
    id: string;
    value: number | string;
  }[];
  return rows.map((row): [string, number] => [row.id, Number(row.value)]);
}

function sortedPairs(pairs: [string, number][]): string[] {
  return pairs.map((pair) => JSON.stringify(pair)).sort();
}

describe(`faults: property-based (${DRIVER}, ${RUNS} cases per property)`, function () {
  this.timeout(TIMEOUT);
  let dir: string;
  before(() => (dir = mkdtempSync(join(tmpdir(), 'ck-props-'))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  describe('eachBatch', () => {
    let db: Awaited<ReturnType<typeof openDatabase>>;
    before(async () => {
      db = await openDatabase('faults_props_batch');
      await db.ds.query('CREATE TABLE prop_effects (job varchar(64) NOT NULL, item integer NOT NULL)');
    });
    after(() => db.close());

    it('any sequence of failing, stopped, joined and rolled-back runs, then one clean run: every item exactly once, totals match the model', async () => {
      const ds = db.ds;
      let jobCounter = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.uniqueArray(fc.integer({ min: -1_000_000, max: 1_000_000 }), { maxLength: 20 }),
          fc.boolean(),
          fc.array(runPlan, { maxLength: 4 }),
          fc.integer({ min: 1, max: 7 }),
          async (data, endsWithEmptyPage, plans, finalLimit) => {
            const job = `p${++jobCounter}`;
            let model: JobModel = { exists: false, done: false, cursor: null, batches: 0, items: 0 };
            for (const plan of [...plans, { limit: finalLimit, mode: 'own' as const }]) {
              const expected = modelRun(data, endsWithEmptyPage, plan, model);
              const injected = new Injected(`fault at round ${plan.fault?.at}`);
              let round = -1;
              const source = (cursor: Json, limit: number) => {
                round++;
                if (plan.fault?.at === round && plan.fault.kind === 'source') throw injected;
                return pageOf(data, endsWithEmptyPage, cursor, limit);
              };
              const handler = async (items: number[], tx: EntityManager) => {
                const fails = plan.fault?.at === round;
                if (fails && plan.fault!.kind === 'handler-before-write') throw injected;
                await tx.query(
                  sql(`INSERT INTO prop_effects (job, item) VALUES ${items.map(() => '(?, ?)').join(', ')}`),
                  items.flatMap((item) => [job, item]),
                );
                if (fails && plan.fault!.kind === 'handler-after-write') throw injected;
              };
              const controller = new AbortController();
              if (plan.stopAfter === 0) controller.abort();
              const options = {
                signal: controller.signal,
                onProgress: (progress: { batches: number }) => {
                  if (progress.batches === plan.stopAfter) controller.abort();
                },
              };
              const call = (db: DataSource | EntityManager) => eachBatch(db, job, source, plan.limit, handler, options);
              let outcome: { result?: EachBatchResult; error?: unknown } = {};
              const settle = async (db: DataSource | EntityManager) => {
                try {
                  outcome = { result: await call(db) };
                } catch (error) {
                  outcome = { error };
                }
              };
              if (plan.mode === 'own') {
                await settle(ds);
              } else {
                const rollback = new Injected('caller rolls back');
                try {
                  await runInTransaction(ds, async (tx) => {
                    await settle(tx);
                    if (plan.mode === 'joined-rollback') throw rollback;
                  });
                } catch (error) {
                  if (error !== rollback) throw error;
                }
              }

              if (expected.failed) {
                expect(outcome.error, 'the injected error did not come back unchanged').to.equal(injected);
              } else {
                if (outcome.error) throw outcome.error;
                expect(outcome.result).to.deep.equal(expected.result);
              }
              if (plan.mode !== 'joined-rollback') model = expected.job;

              const stored = await status(ds, job);
              if (!model.exists) {
                expect(stored).to.equal(null);
              } else {
                expect(stored).to.include({ done: model.done, batches: model.batches, items: model.items });
                expect(stored!.cursor).to.deep.equal(model.cursor);
              }
              const effects = ((await ds.query(sql('SELECT item FROM prop_effects WHERE job = ?'), [job])) as { item: number }[]).map(
                (r) => r.item,
              );
              expect(effects.sort((a, b) => a - b)).to.deep.equal(data.slice(0, model.items).sort((a, b) => a - b));
            }
            expect(model).to.include({ done: true, items: data.length });
          },
        ),
        { numRuns: RUNS },
      );
      await expectNoLeaks(ds, ds);
    });
  });

  describe('imports', () => {
    let db: Awaited<ReturnType<typeof openDatabase>>;
    before(async () => {
      db = await openDatabase('faults_props_import');
      await db.ds.query('CREATE TABLE prop_rows (batch varchar(64) NOT NULL, id varchar(512) NOT NULL, value bigint NOT NULL)');
    });
    after(() => db.close());

    const format = fc.constantFrom<Format>('json', 'ndjson', 'csv');

    it('any invalid JSON, NDJSON or CSV file is INVALID_INPUT and leaves every checkpoint table byte for byte as it was', async () => {
      const ds = db.ds;
      // Something stored already, so "unchanged" is not trivially an empty database.
      const seed = join(dir, 'seed.ndjson');
      writeFileSync(seed, '{"id":"s1","value":1}\n{"id":"s2","value":2}\n{"id":"s3","value":3}\n');
      const stop = new AbortController();
      await importFile(ds, 'existing', seed, { size: 1, onProgress: () => stop.abort(), signal: stop.signal });
      await importFile(ds, 'existing-own', seed, {
        size: 2,
        handler: (rows, tx) =>
          tx.query(sql('INSERT INTO prop_rows (batch, id, value) VALUES (?, ?, ?)'), ['existing-own', rows[0].id, rows[0].value]),
      });
      const before = await dump(ds);
      let fileCounter = 0;
      await fc.assert(
        fc.asyncProperty(
          format,
          rowsArbitrary,
          layoutArbitrary,
          corruptionArbitrary,
          fc.constantFrom('fresh', 'existing', 'existing-own'),
          fc.integer({ min: 1, max: 4 }),
          async (fileFormat, rows, layout, corruption, batch, size) => {
            const { bytes, index } = invalidFile(fileFormat, rows, layout, corruption);
            const path = join(dir, `invalid-${++fileCounter % 4}.${fileFormat}`);
            writeFileSync(path, bytes);
            let handled = 0;
            const handler = batch === 'existing-own' ? () => void handled++ : undefined;
            let failure: unknown;
            try {
              await importFile(ds, batch === 'fresh' ? `fresh-${fileCounter}` : batch, path, { size, handler });
            } catch (error) {
              failure = error;
            }
            expect(failure, `accepted: ${JSON.stringify(bytes.toString())}`).to.be.instanceOf(CheckpointError);
            expect((failure as CheckpointError).code, `${String(failure)} for ${JSON.stringify(bytes.toString())}`).to.equal(
              'INVALID_INPUT',
            );
            if (index !== undefined)
              expect((failure as { index?: number }).index, `${String(failure)} for ${JSON.stringify(bytes.toString())}`).to.equal(index);
            expect(handled).to.equal(0);
            expect(await dump(ds)).to.equal(before);
          },
        ),
        { numRuns: RUNS },
      );
      await expectNoLeaks(ds, ds);
    });

    it('any valid file under any sequence of failing chunks, stops, changed files and reruns: every row exactly once, in its own table or the built-in one', async () => {
      const ds = db.ds;
      const importFault: fc.Arbitrary<ImportFault> = fc.record({
        at: fc.nat({ max: 6 }),
        kind: fc.constantFrom<ImportFault['kind']>('handler-before-write', 'handler-after-write', 'progress-throws', 'abort'),
      });
      const importRun: fc.Arbitrary<ImportRun> = fc.record(
        { size: fc.integer({ min: 1, max: 5 }), fault: importFault, changed: fc.constantFrom<'bytes' | 'rows'>('bytes', 'rows') },
        { requiredKeys: ['size'] },
      );
      let caseCounter = 0;
      await fc.assert(
        fc.asyncProperty(
          format,
          rowsArbitrary,
          layoutArbitrary,
          fc.boolean(),
          fc.array(importRun, { maxLength: 4 }),
          fc.integer({ min: 1, max: 6 }),
          async (fileFormat, rows, layout, builtIn, runs, finalSize) => {
            const batch = `v${++caseCounter}`;
            const path = join(dir, `valid-${caseCounter % 4}.${fileFormat}`);
            const original = fileText(fileFormat, itemTexts(fileFormat, rows, layout), layout);
            writeFileSync(path, original);
            let next = 0;
            for (const [i, run] of [...runs, { size: finalSize }].entries()) {
              if (run.changed && i > 0) {
                // Another file under the same batch id: refused, nothing changes.
                const other =
                  run.changed === 'bytes'
                    ? fileText(fileFormat, itemTexts(fileFormat, rows, layout), { ...layout, trailingNewline: !layout.trailingNewline })
                    : fileText(fileFormat, itemTexts(fileFormat, [...rows, { id: 'new', value: 1 }], layout), layout);
                writeFileSync(path, other);
                const before = await batchState(ds, batch);
                let refused: unknown;
                try {
                  await importFile(ds, batch, path, { format: fileFormat, size: run.size, handler: builtIn ? undefined : () => undefined });
                } catch (error) {
                  refused = error;
                }
                expect(refused).to.be.instanceOf(CheckpointError);
                expect((refused as CheckpointError).code).to.equal('FINGERPRINT_MISMATCH');
                expect(await batchState(ds, batch)).to.equal(before);
                writeFileSync(path, original);
              }
              // Without a handler the rows go to the built-in table: faults come after the commit.
              const fault =
                builtIn && run.fault?.kind.startsWith('handler') ? { ...run.fault, kind: 'progress-throws' as const } : run.fault;
              const injected = new Injected('injected');
              const controller = new AbortController();
              let chunk = -1;
              const handler = async (chunkRows: Row[], tx: EntityManager) => {
                const fails = fault?.at === chunk + 1;
                if (fails && fault!.kind === 'handler-before-write') throw injected;
                await tx.query(
                  sql(`INSERT INTO prop_rows (batch, id, value) VALUES ${chunkRows.map(() => '(?, ?, ?)').join(', ')}`),
                  chunkRows.flatMap((row) => [batch, row.id, row.value]),
                );
                if (fails && fault!.kind === 'handler-after-write') throw injected;
              };
              const onProgress = () => {
                chunk++;
                if (fault?.at !== chunk) return;
                if (fault.kind === 'progress-throws') throw injected;
                if (fault.kind === 'abort') controller.abort();
              };

              // The model: chunks of `size` from `next`; the fault decides where this run ends.
              const chunks = Math.ceil((rows.length - next) / run.size);
              const firesAt = fault !== undefined && fault.at < chunks ? fault.at : undefined;
              const committedChunks = firesAt === undefined ? chunks : fault!.kind.startsWith('handler') ? firesAt : firesAt + 1;
              const expectedNext = Math.min(rows.length, next + committedChunks * run.size);
              const throws = firesAt !== undefined && fault!.kind !== 'abort';

              let result: Awaited<ReturnType<typeof importFile>> | undefined;
              let error: unknown;
              try {
                result = await importFile(ds, batch, path, {
                  format: fileFormat,
                  size: run.size,
                  handler: builtIn ? undefined : handler,
                  onProgress,
                  signal: controller.signal,
                });
              } catch (caught) {
                error = caught;
              }
              if (throws) {
                expect(error, 'the injected error did not come back unchanged').to.equal(injected);
              } else {
                if (error) throw error;
                expect(result).to.include({
                  batch,
                  nextIndex: expectedNext,
                  rows: expectedNext - next,
                  done: expectedNext === rows.length,
                });
              }
              next = expectedNext;
              expect(await checkpoint(ds, batch)).to.equal(next);
              const stored = await storedRows(ds, batch, builtIn);
              expect(sortedPairs(stored)).to.deep.equal(
                sortedPairs(rows.slice(0, next).map((row): [string, number] => [row.id, row.value])),
              );
            }
            expect(next).to.equal(rows.length);
          },
        ),
        { numRuns: RUNS },
      );
      await expectNoLeaks(ds, ds);
    });
  });
});

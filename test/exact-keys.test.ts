// Names, URLs and ids are compared exactly on every driver: keys that differ only in case, accents
// or trailing spaces are different jobs, steps, files, batches and rows (MySQL's default collations
// would make them one key — the migrations give the checkpoint tables an exact one).
import { expect } from 'chai';
import { begin, CheckpointManager, eachBatch, importAll, list, status, step, values } from '../src';
import { DRIVER, useTestDatabase } from './support/database';

const LOOK_ALIKE = ['report', 'Report', 'report ', 'rèport'];

describe(`exact keys (${DRIVER})`, () => {
  const db = useTestDatabase('exact_keys');

  it('steps and batch jobs whose names differ only in case, accents or trailing spaces are separate', async () => {
    for (const name of LOOK_ALIKE) expect(await step(db.ds, `step ${name}`, () => name)).to.equal(name);
    for (const name of LOOK_ALIKE) {
      const result = await eachBatch(
        db.ds,
        `job ${name}`,
        (cursor) => ({ items: cursor === null ? [name] : [], next: null }),
        5,
        () => undefined,
      );
      expect(result).to.include({ done: true, items: 1 });
    }
    for (const name of LOOK_ALIKE) expect(await status(db.ds, `step ${name}`)).to.include({ kind: 'step', value: name });
    expect((await list(db.ds, { prefix: 'step ' })).map((s) => s.value).sort()).to.deep.equal([...LOOK_ALIKE].sort());
    expect(await list(db.ds, { prefix: 'job ', done: true })).to.have.length(LOOK_ALIKE.length);
  });

  it('file URLs that differ only in case or trailing spaces are separate files, claimed separately', async () => {
    const manager = new CheckpointManager(db.ds);
    const urls = LOOK_ALIKE.map((name) => `s3://bucket/${name}.csv`);
    const files = urls.map((fileUrl) => ({ fileUrl, fileType: 'exact', fileTimestamp: new Date(1) }));
    expect(await manager.register(files)).to.equal(urls.length);
    expect(await manager.register(files)).to.equal(0);
    const claimed = await manager.claimNext(10, { fileType: 'exact' });
    expect(claimed.map((file) => file.fileUrl).sort()).to.deep.equal([...urls].sort());
    // A file type that differs only in case is another type.
    expect(await manager.claimNext(10, { fileType: 'EXACT' })).to.deep.equal([]);
    expect(await manager.claimFile('s3://bucket/fresh.csv', 'exact', new Date(1))).to.equal(true);
    expect(await manager.claimFile('s3://bucket/FRESH.csv', 'exact', new Date(1))).to.equal(true);
  });

  it('import ids and batches that differ only in case or trailing spaces are separate rows and batches', async () => {
    const rows = LOOK_ALIKE.map((id, i) => ({ id, value: i }));
    const raw = JSON.stringify(rows);
    expect(await importAll(db.ds, 'exact', raw, { size: 3 })).to.equal(rows.length);
    expect(await values(db.ds, 'exact')).to.have.deep.members(rows.map((row) => [row.id, row.value]));
    expect(await begin(db.ds, 'EXACT', 'f'.repeat(64))).to.equal(0);
    expect(await values(db.ds, 'EXACT')).to.deep.equal([]);
  });
});

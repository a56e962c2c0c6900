import { type MigrationInterface, type QueryRunner, TableIndex } from 'typeorm';
import { claimableIndexPredicate } from '../entities/FileCheckpoint';

const TABLE = 'file_checkpoints';
const NAME = 'IDX_file_checkpoints_claim_order';
// claimNext's pick walks this index in its order and stops after `limit` rows, instead of sorting
// every claimable row on each claim (a cost that grew with the queue). Partial where the database
// can (PostgreSQL, SQLite): completed files and dead letters are not in it.
const INDEX = new TableIndex({
  name: NAME,
  columnNames: ['created_at', 'url_hash'],
  where: claimableIndexPredicate(),
});

/** The claim order index of file_checkpoints. Safe to run twice. */
export class ClaimOrderIndex1765152000000 implements MigrationInterface {
  name = 'ClaimOrderIndex1765152000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    if (!table) return;
    const existing = table.indices.find((index) => index.name === NAME);
    if (existing && existing.columnNames.join() === INDEX.columnNames.join()) return;
    // MySQL drops a dropped column from its indexes (LongFileUrls' down() drops url_hash): rebuild it whole.
    if (existing) await queryRunner.dropIndex(TABLE, NAME);
    await queryRunner.createIndex(TABLE, INDEX.clone());
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const table = await queryRunner.getTable(TABLE);
    if (table?.indices.some((existing) => existing.name === NAME)) await queryRunner.dropIndex(TABLE, NAME);
  }
}

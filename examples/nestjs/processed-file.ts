import { Column, Entity, type MigrationInterface, PrimaryGeneratedColumn, type QueryRunner, Table } from 'typeorm';

/** One row per processed file: the application's own write, committed with the file's completion. */
@Entity('processed_files')
export class ProcessedFile {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ name: 'file_url', type: 'varchar', length: 255 })
  fileUrl!: string;

  @Column({ type: 'integer' })
  lines!: number;
}

export class ProcessedFiles1764720000001 implements MigrationInterface {
  name = 'ProcessedFiles1764720000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'processed_files',
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'file_url', type: 'varchar', length: '255' },
          { name: 'lines', type: 'integer' },
        ],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('processed_files', true);
  }
}

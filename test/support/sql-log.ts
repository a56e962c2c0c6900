import type { Logger, QueryRunner } from 'typeorm';

/**
 * A TypeORM logger that records every statement and its bound parameters, and whether a query
 * runner logged it (TypeORM's own runners pass themselves; the library's direct reads do not).
 */
export class SqlLog implements Logger {
  readonly queries: { sql: string; parameters: unknown[]; viaRunner: boolean }[] = [];

  logQuery(sql: string, parameters?: unknown[], runner?: QueryRunner): void {
    this.queries.push({ sql, parameters: parameters ?? [], viaRunner: runner !== undefined });
  }
  logQueryError(): void {}
  logQuerySlow(): void {}
  logSchemaBuild(): void {}
  logMigration(): void {}
  log(): void {}

  clear(): void {
    this.queries.length = 0;
  }
}

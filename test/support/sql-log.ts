import type { Logger } from 'typeorm';

/** A TypeORM logger that records every statement and its bound parameters. */
export class SqlLog implements Logger {
  readonly queries: { sql: string; parameters: unknown[] }[] = [];

  logQuery(sql: string, parameters?: unknown[]): void {
    this.queries.push({ sql, parameters: parameters ?? [] });
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

import { InvalidArgumentError } from '../../core/errors';
import { dataSourceOf, type Db, transact } from '../../core/transaction';
import { dialectOf, type TableRef } from '../../dialect';
import type { ColumnInference } from './column-inference';

/** A table `create` makes: its name, and the types pass 1 infers for it. */
export interface Creating {
  table: TableRef;
  inference: ColumnInference;
  /** The name is a view's: the statement is a plain CREATE TABLE, which the database refuses (DATABASE_ERROR). */
  overView: boolean;
}

/** INVALID_ARGUMENT when `key` names a field the file does not have: the options' fault, not the rows'. */
export function checkCreateKey(inference: ColumnInference, key: string[] | null): void {
  const columns = inference.columns();
  const missing = (key ?? []).find((field) => !columns.some((column) => column.name === field));
  if (missing !== undefined) throw new InvalidArgumentError(`importFile: create: the key field "${missing}" is not a field of the file.`);
}

/** The CREATE TABLE statement, in the dialect's own types, for what pass 1 inferred; `key` is the primary key. */
export async function createStatement(db: Db, { table, inference, overView }: Creating, key: string[] | null): Promise<string> {
  checkCreateKey(inference, key);
  const dialect = dialectOf(dataSourceOf(db));
  const textKeyCollation = await transact(db, (tx) => dialect.exactTextCollation(tx.queryRunner!));
  const options = { ...(textKeyCollation === undefined ? {} : { textKeyCollation }), ...(overView ? { ifNotExists: false } : {}) };
  return dialect.createTable(table, inference.columns(), key ?? [], options);
}

import type { DataSource } from 'typeorm';
import { binaryWire, CopyBinary, CopyText, dialectOf } from '../../dialect';
import type { PreloadRows } from '../preload';
import type { RowGroup } from './record-rows';
import type { TargetTable } from './target-table';
import { copyRow, type RowCopy } from './write-records';

/**
 * The records of a file `into` `target` as a preload reads them (see `Preload`): each row as COPY
 * rows in its transaction, in the binary format where every column the records fill has one, as
 * pass 2 writes them. Only for a file pass 1 accepts whole (no `map`, no invalid rows allowed):
 * reading stops at the first row that is not a row to write, which pass 1 then rejects.
 * `groups` reads the rows of the blocks as pass 2 does (`sourceGroups`, without values).
 */
export function preloadRecords(
  dataSource: DataSource,
  target: TargetTable,
  groups: (blocks: AsyncGenerator<Buffer>) => AsyncGenerator<RowGroup>,
  size: number,
): PreloadRows {
  const wires = target.columns.map(binaryWire);
  let copying: RowCopy | null = null;
  let columns: number[] | null = null;
  let count = 0;
  let nextOffset: number | null = null;
  return {
    async read(blocks, from, chunkEnded) {
      for await (const group of groups(blocks)) {
        // Two groups in flight at most (Preload): the COPY rows taken before them can be reused.
        copying ??= group.binary === true ? new CopyBinary(3) : new CopyText(3);
        for (let r = 0; r < group.length; r++) {
          const index = group.index(r);
          if (index < from) continue;
          const evaluated = group.evaluate(r, copying);
          if (evaluated.kind !== 'row') return false;
          // Rows read after `csvCopyGroups` handed the rest of the file over are written here, in the same column order.
          if (group.copies) columns = evaluated.columns;
          else copyRow(copying, evaluated.values, (columns ??= evaluated.columns), wires);
          count++;
          if ((index + 1 - from) % size === 0) {
            nextOffset = group.end?.(r) ?? null;
            if (!(await chunkEnded())) return false;
          }
        }
      }
      return true;
    },
    get count() {
      return count;
    },
    get byteLength() {
      return copying?.byteLength ?? 0;
    },
    take() {
      count = 0;
      const taken = { rows: copying!.take(), nextOffset };
      nextOffset = null;
      return taken;
    },
    copy(runner, rows) {
      const names = columns!.map((at) => target.columns[at].name);
      return dialectOf(dataSource).copyRows!(runner, target.table, names, rows, {
        binary: copying instanceof CopyBinary,
        statementRows: rows.rows,
      });
    },
  };
}

import type { DataSource } from 'typeorm';
import { CheckpointManager } from '../claims/checkpoint-manager';
import { type Outcome, success } from './outcome';

/** The file-claims operations `files pause|resume|cancel`. */
export type FilesOperation = 'pause' | 'resume' | 'cancel';

function typeName(fileType: string | undefined): string {
  return fileType === undefined ? 'every file type' : `file type "${fileType}"`;
}

/**
 * `files pause [--type T]`, `files resume [--type T]` and `files cancel <url>`. Nothing to change
 * is not an error (exit 0): the result says so, so the command can be repeated safely.
 */
export async function filesControlCommand(
  db: DataSource,
  operation: FilesOperation,
  target: { fileType?: string; fileUrl?: string },
): Promise<Outcome> {
  const files = new CheckpointManager(db);
  if (operation === 'cancel') {
    const fileUrl = target.fileUrl!;
    const changed = await files.cancel(fileUrl);
    const text = changed
      ? `Cancelled "${fileUrl}": it is not claimed again (a handler running it sees its signal abort at the latest at its worker's next heartbeat).`
      : `Nothing changed: no pending, failed or processing file "${fileUrl}" (unknown, completed or cancelled already).`;
    return success({ command: 'files cancel', fileUrl, changed }, [text]);
  }
  const { fileType } = target;
  const changed = operation === 'pause' ? await files.pause({ fileType }) : await files.resume({ fileType });
  const text = changed
    ? `${operation === 'pause' ? 'Paused' : 'Resumed'} ${typeName(fileType)}${operation === 'pause' ? ': files in flight finish, no new file is claimed.' : '.'}`
    : operation === 'resume' && fileType === undefined
      ? 'Nothing changed: no file type was paused.'
      : `Nothing changed: ${typeName(fileType)} was ${operation === 'pause' ? 'paused already' : 'not paused'}.`;
  return success({ command: `files ${operation}`, ...(fileType === undefined ? {} : { fileType }), changed }, [text]);
}

import { CheckpointJob } from './CheckpointJob';
import { CheckpointFileType } from './CheckpointFileType';
import { CheckpointLease } from './CheckpointLease';
import { CheckpointPartition } from './CheckpointPartition';
import { FileCheckpoint, type FileStatus } from './FileCheckpoint';
import { ImportItem } from './ImportItem';
import { ImportJob } from './ImportJob';
import { ImportReject } from './ImportReject';

export {
  CheckpointFileType,
  CheckpointJob,
  CheckpointLease,
  CheckpointPartition,
  FileCheckpoint,
  type FileStatus,
  ImportItem,
  ImportJob,
  ImportReject,
};

/** Add these to your DataSource's `entities`. */
export const checkpointEntities = [
  CheckpointJob,
  ImportJob,
  ImportItem,
  FileCheckpoint,
  ImportReject,
  CheckpointPartition,
  CheckpointLease,
  CheckpointFileType,
];

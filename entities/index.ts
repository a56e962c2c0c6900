import { CheckpointJob } from './CheckpointJob';
import { CheckpointPartition } from './CheckpointPartition';
import { FileCheckpoint, type FileStatus } from './FileCheckpoint';
import { ImportItem } from './ImportItem';
import { ImportJob } from './ImportJob';
import { ImportReject } from './ImportReject';

export { CheckpointJob, CheckpointPartition, FileCheckpoint, type FileStatus, ImportItem, ImportJob, ImportReject };

/** Add these to your DataSource's `entities`. */
export const checkpointEntities = [CheckpointJob, ImportJob, ImportItem, FileCheckpoint, ImportReject, CheckpointPartition];

import { CheckpointJob } from './CheckpointJob';
import { CheckpointPartition } from './CheckpointPartition';
import { FileCheckpoint, type FileStatus } from './FileCheckpoint';
import { ImportItem } from './ImportItem';
import { ImportJob } from './ImportJob';

export { CheckpointJob, CheckpointPartition, FileCheckpoint, type FileStatus, ImportItem, ImportJob };

/** Add these to your DataSource's `entities`. */
export const checkpointEntities = [CheckpointJob, ImportJob, ImportItem, FileCheckpoint, CheckpointPartition];

import { CheckpointJob } from './CheckpointJob';
import { ImportItem } from './ImportItem';
import { ImportJob } from './ImportJob';

export { CheckpointJob, ImportItem, ImportJob };

/** Add these to your DataSource's `entities`. */
export const checkpointEntities = [CheckpointJob, ImportJob, ImportItem];

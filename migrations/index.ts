import { CheckpointJobs1764460800000 } from './1764460800000-CheckpointJobs';

/** Add these to your DataSource's `migrations` (they are safe to run twice). */
export const checkpointMigrations = [CheckpointJobs1764460800000];

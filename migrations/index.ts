import { CheckpointJobs1764460800000 } from './1764460800000-CheckpointJobs';
import { FileCheckpoints1764547200000 } from './1764547200000-FileCheckpoints';
import { DashboardIndexes1764892800000 } from './1764892800000-DashboardIndexes';

/** Add these to your DataSource's `migrations` (they are safe to run twice). */
export const checkpointMigrations = [CheckpointJobs1764460800000, FileCheckpoints1764547200000, DashboardIndexes1764892800000];

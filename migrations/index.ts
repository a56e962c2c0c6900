import { CheckpointJobs1764460800000 } from './1764460800000-CheckpointJobs';
import { FileCheckpoints1764547200000 } from './1764547200000-FileCheckpoints';
import { ImportRejects1764633600000 } from './1764633600000-ImportRejects';
import { LongFileUrls1764720000000 } from './1764720000000-LongFileUrls';
import { CheckpointPartitions1764806400000 } from './1764806400000-CheckpointPartitions';
import { DashboardIndexes1764892800000 } from './1764892800000-DashboardIndexes';
import { ImportProgress1764979200000 } from './1764979200000-ImportProgress';
import { DashboardSearchIndexes1765065600000 } from './1765065600000-DashboardSearchIndexes';
import { ClaimOrderIndex1765152000000 } from './1765152000000-ClaimOrderIndex';
import { CheaperFileUpdates1765238400000 } from './1765238400000-CheaperFileUpdates';
import { ControlState1765324800000 } from './1765324800000-ControlState';
import { FileControl1765411200000 } from './1765411200000-FileControl';
import { DashboardScale1765497600000 } from './1765497600000-DashboardScale';
import { JobTotals1765584000000 } from './1765584000000-JobTotals';
import { Leases1765670400000 } from './1765670400000-Leases';
import { ThrottledUntil1765756800000 } from './1765756800000-ThrottledUntil';
import { ImportResume1765843200000 } from './1765843200000-ImportResume';
import { ImportOffset1765929600000 } from './1765929600000-ImportOffset';
import { ImportRepeats1766016000000 } from './1766016000000-ImportRepeats';

/** Add these to your DataSource's `migrations` (they are safe to run twice). */
export const checkpointMigrations = [
  CheckpointJobs1764460800000,
  FileCheckpoints1764547200000,
  ImportRejects1764633600000,
  LongFileUrls1764720000000,
  CheckpointPartitions1764806400000,
  DashboardIndexes1764892800000,
  ImportProgress1764979200000,
  DashboardSearchIndexes1765065600000,
  ClaimOrderIndex1765152000000,
  CheaperFileUpdates1765238400000,
  ControlState1765324800000,
  FileControl1765411200000,
  DashboardScale1765497600000,
  JobTotals1765584000000,
  Leases1765670400000,
  ThrottledUntil1765756800000,
  ImportResume1765843200000,
  ImportOffset1765929600000,
  ImportRepeats1766016000000,
];

import type { DataSource } from 'typeorm';
import { CheckpointManager } from '../claims/checkpoint-manager';
import type { ClaimSummary } from '../claims/claim-store';

export type FilesSummary = ClaimSummary;

/** The file-claims summary of the database (counts by status, dead letters, record totals). */
export async function filesSummary(db: DataSource): Promise<FilesSummary> {
  return new CheckpointManager(db).summary();
}

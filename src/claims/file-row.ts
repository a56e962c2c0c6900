import { hash } from 'node:crypto';
import type { FileCheckpoint, FileStatus } from '../../entities/FileCheckpoint';

/** The row key: SHA-256 of the URL's UTF-8 bytes in lowercase hex (the migration's and SQL functions' too). */
export function urlHash(fileUrl: string): string {
  // The one-shot hash: a third of createHash's cost, paid on every completion and heartbeat.
  return hash('sha256', fileUrl, 'hex');
}

/** A `file_checkpoints` row as the drivers return it (pg: int8 as strings). */
export interface FileRow {
  url_hash: string;
  file_url: string;
  file_type: string;
  file_timestamp: number | string;
  status: string;
  records_total: number | string;
  records_filtered: number | string;
  records_persisted: number | string;
  processing_time_ms: number | string;
  error_message: string | null;
  retry_count: number | string;
  max_retries: number | string;
  processed_by: string | null;
  claim_token: number | string;
  lease_expires_at: number | string | null;
  started_at: number | string | null;
  completed_at: number | string | null;
  created_at: number | string;
}

export function toFileCheckpoint(row: FileRow): FileCheckpoint {
  const date = (ms: number | string | null): Date | null => (ms === null ? null : new Date(Number(ms)));
  return {
    fileUrl: row.file_url,
    fileType: row.file_type,
    fileTimestamp: new Date(Number(row.file_timestamp)),
    status: row.status as FileStatus,
    recordsTotal: Number(row.records_total),
    recordsFiltered: Number(row.records_filtered),
    recordsPersisted: Number(row.records_persisted),
    processingTimeMs: Number(row.processing_time_ms),
    errorMessage: row.error_message,
    retryCount: Number(row.retry_count),
    maxRetries: Number(row.max_retries),
    processedBy: row.processed_by,
    claimToken: Number(row.claim_token),
    leaseExpiresAt: date(row.lease_expires_at),
    startedAt: date(row.started_at),
    completedAt: date(row.completed_at),
    createdAt: new Date(Number(row.created_at)),
  };
}

import type { ValueTransformer } from 'typeorm';

/**
 * Times are stored as milliseconds since the Unix epoch in a `bigint` column: one type that every
 * driver maps, keeps milliseconds, and compares as a plain number in SQL (lease expiry).
 */
export const epochMsDate: ValueTransformer = {
  to: (value: unknown) => (value instanceof Date ? value.getTime() : value),
  from: (value: unknown) => (value === null || value === undefined ? value : new Date(Number(value))),
};

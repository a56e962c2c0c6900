import type { ValueTransformer } from 'typeorm';

/** `bigint` columns come back from `pg` as strings; the values stored here are safe integers. */
export const bigintNumber: ValueTransformer = {
  to: (value: unknown) => value,
  from: (value: unknown) => (value === null || value === undefined ? value : Number(value)),
};

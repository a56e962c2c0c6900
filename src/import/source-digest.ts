import { createHash } from 'node:crypto';
import { sourceBytes } from './parse-rows';
import { fileBlocks } from './source-blocks';

const DIGEST_READ_BYTES = 1 << 20;

/** SHA-256 hex of the source bytes (a string as UTF-8). No normalisation: one changed byte is another source. */
export function sourceDigest(raw: Uint8Array | string): string {
  return createHash('sha256').update(sourceBytes(raw)).digest('hex');
}

/** SHA-256 hex of a file's bytes, streamed: the digest `importFile` binds the file's import to. */
export async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256');
  // 1 MiB reads: at 64 KiB each read's round trip through the thread pool costs as much as hashing it.
  for await (const block of fileBlocks(path, DIGEST_READ_BYTES, true)) hash.update(block);
  return hash.digest('hex');
}

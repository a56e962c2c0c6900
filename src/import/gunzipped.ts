import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { CheckpointError, InvalidInputError } from '../core/errors';

/** A source path ending in `.gz` is read through gunzip. */
export const GZIP = /\.gz$/i;

/** The bytes of a gzip stream, decompressed as they arrive; a truncated or corrupt stream is INVALID_INPUT. */
export async function* gunzipped(blocks: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const gunzip = createGunzip();
  const source = Readable.from(blocks, { objectMode: false });
  source.on('error', (error) => gunzip.destroy(error));
  source.pipe(gunzip);
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) yield chunk;
  } catch (error) {
    if (error instanceof CheckpointError) throw error;
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('Z_')) {
      throw new InvalidInputError(`The gzip stream is truncated or corrupt (${(error as Error).message}).`, undefined, { cause: error });
    }
    throw error;
  } finally {
    source.destroy();
    gunzip.destroy();
  }
}

/** The file's bytes as the format readers want them: gunzipped for a `.gz` source. */
export function decoded<B extends AsyncIterable<Buffer>>(blocks: B, gzip: boolean): AsyncGenerator<Buffer> | B {
  return gzip ? gunzipped(blocks) : blocks;
}

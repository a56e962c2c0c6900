// The require hook of the tests' child processes (`node -r ./test/support/register.js file.ts`):
// each .ts file transpiled by swc as it loads, in place, so __dirname and relative paths are the
// source's. ts-node does the same but first loads the TypeScript compiler: ~1.3 s more CPU for every
// child, and the suites start hundreds. Types are checked once, by `npm run lint`.
// The output is kept on disk by a hash of the source and its path (node_modules/.cache), so the
// hundreds of children of a run transpile the library once instead of once each.
const { createHash } = require('node:crypto');
const { mkdirSync, readFileSync, renameSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { transpile, VERSION } = require('./swc');

const CACHE = join(__dirname, '..', '..', 'node_modules', '.cache', 'typeorm-checkpoint-swc');

function cached(source, filename) {
  const key = createHash('sha256').update(VERSION).update('\0').update(filename).update('\0').update(source).digest('hex');
  const file = join(CACHE, `${key}.js`);
  try {
    return readFileSync(file, 'utf8');
  } catch {
    const code = transpile(source, filename, true);
    try {
      mkdirSync(CACHE, { recursive: true });
      // Written aside and renamed: a child reading it meanwhile sees the whole file or none.
      const partial = `${file}.${process.pid}`;
      writeFileSync(partial, code);
      renameSync(partial, file);
    } catch {
      // A cache that cannot be written only costs the next child the transpile.
    }
    return code;
  }
}

require.extensions['.ts'] = (module, filename) => {
  module._compile(cached(readFileSync(filename, 'utf8'), filename), filename);
};

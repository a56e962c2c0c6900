// The require hook of the tests' child processes (`node -r ./test/support/register.js file.ts`):
// each .ts file transpiled by swc as it loads, in place, so __dirname and relative paths are the
// source's. ts-node does the same but first loads the TypeScript compiler: ~1.3 s more CPU for every
// child, and the suites start hundreds. Types are checked once, by `npm run lint`.
const { readFileSync } = require('node:fs');
const { transpile } = require('./swc');

require.extensions['.ts'] = (module, filename) => {
  module._compile(transpile(readFileSync(filename, 'utf8'), filename, true), filename);
};

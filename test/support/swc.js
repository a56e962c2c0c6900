// TypeScript to CommonJS with swc, with the settings ts-node's `swc` mode takes from tsconfig.json
// (ES2022, legacy decorators with their metadata, define semantics for class fields). Shared by the
// test children's require hook (register.js) and the bench's plain-Node builds (bench/compile.ts).
// @swc/core (a native binding) is loaded on the first transpile only: a child whose every file is
// in register.js's cache never loads it.

const OPTIONS = {
  swcrc: false,
  module: { type: 'commonjs', strictMode: true, noInterop: false },
  jsc: {
    parser: { syntax: 'typescript', decorators: true, dynamicImport: true },
    target: 'es2022',
    transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: true },
    keepClassNames: true,
  },
};

/** JavaScript for the TypeScript `source` of `filename`; with `sourceMap`, an inline source map for stack traces. */
function transpile(source, filename, sourceMap = false) {
  return require('@swc/core').transformSync(source, { ...OPTIONS, filename, sourceMaps: sourceMap ? 'inline' : false }).code;
}

/** What the output depends on besides the source: swc's version and the options above. */
const VERSION = `${require('@swc/core/package.json').version} ${JSON.stringify(OPTIONS)}`;

module.exports = { transpile, VERSION };

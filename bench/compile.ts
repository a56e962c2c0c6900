// Transpiles the library (and bench scripts that must run on plain Node) with swc, the transpiler
// the test children use: a measured process must not carry ts-node's compiler in its memory.
import { transformFileSync } from '@swc/core';
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const ROOT = join(__dirname, '..');

function typescriptFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return typescriptFiles(path);
    return entry.endsWith('.ts') && !entry.endsWith('.d.ts') ? [path] : [];
  });
}

/** Writes JavaScript for src/, entities/, migrations/ and `extra` files under `outDir`, keeping the layout. */
export function compileForNode(outDir: string, extra: string[] = []): void {
  const files = [...['src', 'entities', 'migrations'].flatMap((dir) => typescriptFiles(join(ROOT, dir))), ...extra.map((f) => join(ROOT, f))];
  for (const file of files) {
    const { code } = transformFileSync(file, {
      swcrc: false,
      module: { type: 'commonjs', strictMode: true, noInterop: false },
      jsc: {
        parser: { syntax: 'typescript', decorators: true, dynamicImport: true },
        target: 'es2022',
        transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: true },
        keepClassNames: true,
      },
    });
    const target = join(outDir, relative(ROOT, file)).replace(/\.ts$/, '.js');
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, code);
  }
}

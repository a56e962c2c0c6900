// Transpiles the library (and bench scripts that must run on plain Node) with swc, the transpiler
// the test children use: a measured process must not carry ts-node's compiler in its memory.
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

// The transpiler (and settings) of the test children's require hook.
const { transpile } = require('../test/support/swc') as { transpile(source: string, filename: string): string };

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
  const files = [
    ...['src', 'entities', 'migrations'].flatMap((dir) => typescriptFiles(join(ROOT, dir))),
    ...extra.map((f) => join(ROOT, f)),
  ];
  for (const file of files) {
    const code = transpile(readFileSync(file, 'utf8'), file);
    const target = join(outDir, relative(ROOT, file)).replace(/\.ts$/, '.js');
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, code);
  }
}

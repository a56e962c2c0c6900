// `npm run docs:check [-- files…]`: the Markdown's doc tests, as Rust's are.
// - Every ```ts block is type-checked as its own ES module against the package's own types
//   ('typeorm-checkpoint' is src/index.ts). A page's hidden prelude, an HTML comment
//   `<!-- prelude … -->`, is prepended to each of its blocks, less the names a block declares itself.
// - Every shell line that runs `typeorm-checkpoint` is parsed by the CLI's own commander program:
//   an unknown command or option, a missing required option or a bad choice fails the check.
// Relative links and #anchors are checked by remark-validate-links (`npm run docs:links`).
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { Command, CommanderError } from 'commander';
import * as ts from 'typescript';
import { createProgram as createCliProgram } from '../src/cli/program';

const ROOT = join(__dirname, '..');
const OUT = join(ROOT, '.tmp', 'doc-examples');
const TS_FENCES = new Set(['ts', 'typescript']);
const SHELL_FENCES = new Set(['sh', 'shell', 'bash', 'console']);

interface Block {
  file: string;
  language: string;
  line: number; // 1-based line of the block's first code line in the Markdown file
  code: string;
}

interface Problem {
  file: string;
  line: number;
  message: string;
}

/** README.md, CONTRIBUTING.md, docs/**.md (not the generated API) and bench/*.md. */
function defaultFiles(): string[] {
  const found = ['README.md', 'CONTRIBUTING.md'];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory() && path !== join('docs', 'api')) walk(path);
      else if (entry.name.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  walk('bench');
  return found.filter((file) => readdirSync(join(ROOT, file, '..')).includes(basename(file)));
}

/** Fenced code blocks (``` or ~~~), with the line their code starts on. */
function fencedBlocks(file: string, text: string): Block[] {
  const blocks: Block[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)/.exec(lines[i]);
    if (!open) continue;
    const fence = open[1];
    const start = i + 1;
    let end = start;
    while (end < lines.length && !new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(lines[end])) end++;
    blocks.push({ file, language: open[2].toLowerCase(), line: start + 1, code: lines.slice(start, end).join('\n') });
    i = end;
  }
  return blocks;
}

function prelude(text: string): string {
  return /<!--\s*prelude\s*\n([\s\S]*?)-->/.exec(text)?.[1] ?? '';
}

/** Names a module declares at its top level: imports, variables, functions, classes, types. */
function declaredNames(source: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  const bind = (name: ts.BindingName): void => {
    if (ts.isIdentifier(name)) names.add(name.text);
    else for (const element of name.elements) if (!ts.isOmittedExpression(element)) bind(element.name);
  };
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      if (clause?.name) names.add(clause.name.text);
      const bindings = clause?.namedBindings;
      if (bindings && ts.isNamespaceImport(bindings)) names.add(bindings.name.text);
      if (bindings && ts.isNamedImports(bindings)) for (const element of bindings.elements) names.add(element.name.text);
    } else if (ts.isImportEqualsDeclaration(statement)) {
      names.add(statement.name.text);
    } else if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) bind(declaration.name);
    } else if (
      (ts.isFunctionDeclaration(statement) ||
        ts.isClassDeclaration(statement) ||
        ts.isInterfaceDeclaration(statement) ||
        ts.isTypeAliasDeclaration(statement) ||
        ts.isEnumDeclaration(statement) ||
        ts.isModuleDeclaration(statement)) &&
      statement.name &&
      ts.isIdentifier(statement.name)
    ) {
      names.add(statement.name.text);
    }
  }
  return names;
}

/** The prelude without the names `taken` by the block itself. */
function preludeFor(preludeText: string, taken: Set<string>): string {
  if (preludeText.trim() === '') return '';
  const source = ts.createSourceFile('prelude.ts', preludeText, ts.ScriptTarget.ES2022, true);
  const printer = ts.createPrinter();
  const kept: string[] = [];
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement) && statement.importClause) {
      const clause = statement.importClause;
      const name = clause.name && !taken.has(clause.name.text) ? clause.name : undefined;
      let bindings = clause.namedBindings;
      if (bindings && ts.isNamespaceImport(bindings) && taken.has(bindings.name.text)) bindings = undefined;
      if (bindings && ts.isNamedImports(bindings)) {
        const elements = bindings.elements.filter((element) => !taken.has(element.name.text));
        bindings = elements.length > 0 ? ts.factory.updateNamedImports(bindings, elements) : undefined;
      }
      if (!name && !bindings) continue;
      const updated = ts.factory.updateImportDeclaration(
        statement,
        statement.modifiers,
        ts.factory.updateImportClause(clause, clause.phaseModifier, name, bindings),
        statement.moduleSpecifier,
        statement.attributes,
      );
      kept.push(printer.printNode(ts.EmitHint.Unspecified, updated, source));
      continue;
    }
    const own = declaredNames(ts.createSourceFile('one.ts', statement.getText(source), ts.ScriptTarget.ES2022, true));
    if ([...own].some((n) => taken.has(n))) continue;
    kept.push(statement.getText(source));
  }
  return kept.join('\n');
}

function typeCheck(blocks: Block[], texts: Map<string, string>): Problem[] {
  rmSync(OUT, { recursive: true, force: true });
  const origins = new Map<string, { block: Block; preludeLines: number }>();
  blocks.forEach((block, n) => {
    const own = declaredNames(ts.createSourceFile('block.ts', block.code, ts.ScriptTarget.ES2022, true));
    const head = preludeFor(prelude(texts.get(block.file) ?? ''), own);
    const preludeLines = head === '' ? 0 : head.split('\n').length;
    const dir = join(OUT, block.file.replace(/[/.]/g, '_'));
    mkdirSync(dir, { recursive: true });
    const path = join(dir, `block-${n}-line-${block.line}.ts`);
    writeFileSync(path, `${head === '' ? '' : `${head}\n`}${block.code}\nexport {};\n`);
    origins.set(path, { block, preludeLines });
  });
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ES2022,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    strict: true,
    noEmit: true,
    esModuleInterop: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    skipLibCheck: true,
    baseUrl: ROOT,
    paths: { 'typeorm-checkpoint': ['src/index.ts'], 'typeorm-checkpoint/nestjs': ['src/nestjs/index.ts'] },
  };
  const program = ts.createProgram([...origins.keys()], options);
  const problems: Problem[] = [];
  for (const [path, { block, preludeLines }] of origins) {
    const source = program.getSourceFile(path);
    if (!source) throw new Error(`doc example ${path} was not compiled`);
    for (const diagnostic of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
      const at = source.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line;
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
      problems.push(
        at < preludeLines
          ? { file: block.file, line: block.line, message: `in the page's prelude (as used by this block): ${message}` }
          : { file: block.file, line: block.line + at - preludeLines, message },
      );
    }
  }
  return problems;
}

/** Shell words of one command line: quotes, backslashes, `#` comments. */
function shellWords(line: string): string[][] {
  const commands: string[][] = [[]];
  let word: string | null = null;
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < line.length) word += line[++i];
      else word += c;
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      word ??= '';
    } else if (c === '\\' && i + 1 < line.length) {
      word = (word ?? '') + line[++i];
    } else if (/\s/.test(c) || c === ';' || c === '|' || c === '&') {
      if (word !== null) commands[commands.length - 1].push(word);
      word = null;
      if (c !== ' ' && c !== '\t') commands.push([]);
    } else if (c === '#' && word === null) {
      break;
    } else {
      word = (word ?? '') + c;
    }
  }
  if (word !== null) commands[commands.length - 1].push(word);
  return commands.filter((words) => words.length > 0);
}

/** The CLI's arguments, when the command runs typeorm-checkpoint; redirections dropped. */
function cliArguments(words: string[]): string[] | null {
  let at = 0;
  while (at < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[at])) at++; // VAR=value prefixes
  if (words[at] === '$' || words[at] === '>') at++; // a console prompt
  if (words[at] === 'npx') at++;
  if (words[at] === 'npm' && words[at + 1] === 'run' && words[at + 2] === 'cli' && words[at + 3] === '--') at += 3;
  else if (words[at] !== 'typeorm-checkpoint' && !/(^|\/)main\.(ts|js)$/.test(words[at] ?? '')) return null;
  const args: string[] = [];
  for (let i = at + 1; i < words.length; i++) {
    if (/^\d?>>?$|^<$/.test(words[i]))
      i++; // `> file`, `2> file`, `< file`
    else if (!/^\d?>>?&?\d*|^</.test(words[i])) args.push(words[i]);
  }
  return args;
}

function quietProgram(): Command {
  const program = createCliProgram(() => {});
  const silence = (command: Command): void => {
    command.configureOutput({ writeOut: () => {}, writeErr: () => {}, outputError: () => {} }).exitOverride();
    for (const sub of command.commands) {
      sub.action(() => {}); // parse only: the command's own action never runs
      silence(sub);
    }
  };
  silence(program);
  return program;
}

function checkShell(blocks: Block[]): Problem[] {
  const problems: Problem[] = [];
  let checked = 0;
  for (const block of blocks) {
    const lines = block.code.split('\n');
    for (let i = 0; i < lines.length; i++) {
      let line = lines[i];
      const first = i;
      while (line.endsWith('\\') && i + 1 < lines.length) line = `${line.slice(0, -1)} ${lines[++i]}`;
      for (const words of shellWords(line)) {
        const args = cliArguments(words);
        if (!args) continue;
        checked++;
        try {
          quietProgram().parse(args, { from: 'user' });
        } catch (error) {
          if (error instanceof CommanderError && error.exitCode === 0) continue; // --help, --version
          const message = error instanceof Error ? error.message : String(error);
          problems.push({ file: block.file, line: block.line + first, message: `typeorm-checkpoint ${args.join(' ')}: ${message}` });
        }
      }
    }
  }
  process.stderr.write(`docs: ${checked} typeorm-checkpoint command lines parsed\n`);
  return problems;
}

function main(): void {
  const files = process.argv.length > 2 ? process.argv.slice(2).map((file) => relative(ROOT, join(process.cwd(), file))) : defaultFiles();
  const texts = new Map(files.map((file) => [file, readFileSync(join(ROOT, file), 'utf8')]));
  const blocks = files.flatMap((file) => fencedBlocks(file, texts.get(file) ?? ''));
  const tsBlocks = blocks.filter((block) => TS_FENCES.has(block.language));
  const problems = [...typeCheck(tsBlocks, texts), ...checkShell(blocks.filter((block) => SHELL_FENCES.has(block.language)))];
  process.stderr.write(`docs: ${tsBlocks.length} ts examples type-checked in ${files.length} Markdown files\n`);
  for (const problem of problems) process.stderr.write(`${problem.file}:${problem.line}: ${problem.message}\n`);
  if (problems.length > 0) {
    process.stderr.write(`docs: ${problems.length} problem(s)\n`);
    process.exitCode = 1;
  }
}

main();

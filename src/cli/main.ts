#!/usr/bin/env node
import 'reflect-metadata';
import { runCli } from './program';

// Exit codes: 0 ok, 1 runtime failure or interrupted import, 2 usage / invalid input (see exit-codes.ts).
runCli(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`typeorm-checkpoint: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);

#!/usr/bin/env node
import { CommanderError } from 'commander';
import { ConfigError } from '../config.js';
import { AppError } from '../errors.js';
import { CliError } from './cli-error.js';
import { buildProgram } from './program.js';

buildProgram()
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : 2);
    const message =
      error instanceof AppError || error instanceof ConfigError || error instanceof CliError
        ? error.message
        : `unexpected failure: ${(error as Error).message ?? String(error)}`;
    process.stderr.write(`intake: ${message.replace(/\n\s*/g, '; ')}\n`);
    process.exit(1);
  });

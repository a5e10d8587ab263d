#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../config.js';
import { AppError } from '../errors.js';
import { registerCompanyCommands } from './company.js';
import { print, withStore } from './context.js';
import { registerDestinationCommands } from './destination.js';
import { registerIntegrationCommands } from './integration.js';
import { registerKeyCommands } from './key.js';
import { registerSecretsCommands } from './secrets.js';
import { registerUserCommands } from './user.js';

/** `intake`: operate the service on the database INTAKE_DATABASE_URL names, server running or not. */
const program = new Command('intake')
  .description('webhook intake service')
  .exitOverride();

program
  .command('serve')
  .description('start the server (same as npm start)')
  // Loaded only here: the other commands start faster without the HTTP server's modules.
  .action(async () => (await import('../serve.js')).serve());
program
  .command('migrate')
  .description('apply pending database migrations')
  .option('--json', 'print one JSON object')
  .action((options: { json?: boolean }) =>
    withStore(async ({ store }) => print({ applied: await store.migrate() }, options), { migrate: false }),
  );
registerCompanyCommands(program);
registerUserCommands(program);
registerIntegrationCommands(program);
registerKeyCommands(program);
registerSecretsCommands(program);
registerDestinationCommands(program);

program.parseAsync(process.argv).catch((error: unknown) => {
  if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : 2);
  const message =
    error instanceof AppError || error instanceof ConfigError
      ? error.message
      : `unexpected failure: ${(error as Error).message ?? String(error)}`;
  process.stderr.write(`intake: ${message.replace(/\n\s*/g, '; ')}\n`);
  process.exit(1);
});

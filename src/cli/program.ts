import { Command } from 'commander';
import { registerCompanyCommands } from './company.js';
import { print, withStore } from './context.js';
import { registerDestinationCommands } from './destination.js';
import { registerErasureCommands } from './erasure.js';
import { registerIntegrationCommands } from './integration.js';
import { registerKeyCommands } from './key.js';
import { registerLoginCommands } from './login.js';
import { registerListenCommand } from './listen/command.js';
import { registerSecretsCommands } from './secrets.js';
import { registerUserCommands } from './user.js';

/**
 * `intake`: operate the service on the database INTAKE_DATABASE_URL names, server running
 * or not. Built apart from main.ts's parsing so that `npm run docs` renders the CLI
 * reference (docs/reference/cli.md) from these very definitions.
 */
export function buildProgram(): Command {
  const program = new Command('intake').description('webhook intake service').exitOverride();
  program
    .command('serve')
    .description('start the server (same as npm start)')
    // Loaded only here: the other commands start faster without the HTTP server's modules.
    .action(async () => (await import('../serve.js')).serve());
  program
    .command('migrate')
    .description('apply pending database migrations (the server also does it on start)')
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
  registerErasureCommands(program);
  registerLoginCommands(program);
  registerListenCommand(program);
  return program;
}

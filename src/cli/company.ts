import type { Command } from 'commander';
import { print, withStore } from './context.js';

export function registerCompanyCommands(program: Command): void {
  const company = program.command('company').description('companies (tenants)');
  company
    .command('create')
    .description('create a company')
    .requiredOption('--name <name>', 'company name')
    .option('--json', 'print one JSON object')
    .action((options: { name: string; json?: boolean }) =>
      withStore(async ({ management }) => {
        const created = await management.createCompany(options.name);
        print({ id: created.id, name: created.name }, options);
      }),
    );
}

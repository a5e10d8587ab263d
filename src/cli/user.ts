import type { Command } from 'commander';
import { print, withStore } from './context.js';

export function registerUserCommands(program: Command): void {
  const user = program.command('user').description('admin panel users');
  user
    .command('create')
    .description('create a user (or add an existing one) as a member of a company')
    .requiredOption('--company <id>', 'company id (cmp_…)')
    .requiredOption('--email <email>', 'login email')
    .requiredOption('--password <password>', 'login password (12 characters or more)')
    .option('--role <role>', 'owner, admin or viewer', 'owner')
    .option('--json', 'print one JSON object')
    .action((options: { company: string; email: string; password: string; role: string; json?: boolean }) =>
      withStore(async ({ management }) => {
        const created = await management.addUser(options.company, options.email, options.password, options.role);
        print({ id: created.id, email: created.email }, options);
      }),
    );
}

import type { Command } from 'commander';
import { accountAudit, passwordResetLink } from '../admin/accounts.js';
import { AppError } from '../errors.js';
import type { Store } from '../store/store.js';
import { print, withStore } from './context.js';

export function registerUserCommands(program: Command): void {
  const user = program.command('user').description('admin panel users');
  user
    .command('create')
    .description("an operator's bootstrap: create an account (or take an existing one) as a member of a company")
    .requiredOption('--company <id>', 'company id (cmp_…)')
    .requiredOption('--email <email>', 'login email')
    .requiredOption('--password <password>', 'login password for a new account (12 characters or more); an existing account keeps its own')
    .option('--role <role>', 'owner, admin or viewer', 'owner')
    .option('--json', 'print one JSON object')
    .action((options: { company: string; email: string; password: string; role: string; json?: boolean }) =>
      withStore(async ({ management }) => {
        const created = await management.addUser(options.company, options.email, options.password, options.role);
        print({ id: created.id, email: created.email }, options);
      }),
    );
  user
    .command('reset-password')
    .description('print a one-time link (valid 1 hour) with which the account holder chooses a new password')
    .requiredOption('--email <email>', "the account's email")
    .option('--json', 'print one JSON object')
    .action((options: { email: string; json?: boolean }) =>
      withStore(async ({ store, config }) => {
        const account = await findAccount(store, options.email);
        const resetUrl = await passwordResetLink(store, config.baseUrl, account.id);
        print({ reset_url: resetUrl }, options, 'Give the link to the account holder only: it sets the password of the account, once, within an hour.');
      }),
    );
  user
    .command('two-factor-off')
    .description("turn off an account's two-factor sign-in (its holder lost the app and the recovery codes) and end its sessions")
    .requiredOption('--email <email>', "the account's email")
    .option('--json', 'print one JSON object')
    .action((options: { email: string; json?: boolean }) =>
      withStore(async ({ store, actor }) => {
        const account = await findAccount(store, options.email);
        await store.disableTwoFactor(account.id, accountAudit('account.two_factor_disable', account, actor, Date.now()));
        await store.deleteSessionsOfUser(account.id);
        print({ id: account.id, email: account.email, two_factor_enabled: false }, options);
      }),
    );
}

async function findAccount(store: Store, email: string) {
  const account = await store.findUserByEmail(email.trim().toLowerCase());
  if (!account) throw new AppError('not_found', `Nobody has an account with ${email.trim()}.`);
  return account;
}

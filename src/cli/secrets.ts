import type { Command } from 'commander';
import { print, withStore } from './context.js';

/**
 * `intake secrets rotate`: after INTAKE_SECRETS_KEY gains a new first key (`new,old`),
 * reseals every stored secret with it, so the old key can then be removed. Safe while the
 * server runs: each value is replaced only if it is still what was read.
 */
export function registerSecretsCommands(program: Command): void {
  const secrets = program.command('secrets').description('the secrets sealed with INTAKE_SECRETS_KEY');
  secrets
    .command('rotate')
    .description("reseal every stored secret with INTAKE_SECRETS_KEY's first key (then the others can go)")
    .option('--json', 'print one JSON object')
    .action((options: { json?: boolean }) =>
      withStore(async ({ store, secrets: box }) => {
        const values = await store.listSealedValues();
        const stale = values.filter((value) => !box.sealedWithCurrentKey(value.sealed));
        const resealed = await store.replaceSealedValues(stale.map((value) => ({ ...value, resealed: box.seal(box.open(value.sealed)) })));
        print({ sealed_values: values.length, resealed, key_id: box.currentKeyId }, options);
      }),
    );
}

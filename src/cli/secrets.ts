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
        const resealable: Array<(typeof values)[number] & { resealed: string }> = [];
        let unopenable = 0;
        for (const value of stale) {
          try {
            resealable.push({ ...value, resealed: box.seal(box.open(value.sealed)) });
          } catch {
            // Sealed with a key no longer configured: counted, so the operator knows to add it back.
            unopenable++;
          }
        }
        const resealed = await store.replaceSealedValues(resealable);
        print({ sealed_values: values.length, resealed, unopenable, key_id: box.currentKeyId }, options);
        if (unopenable > 0) process.exitCode = 1;
      }),
    );
}

import { MIN_PASSWORD_LENGTH } from '../api/types';
import { Field } from './dialog';

/** The email an account signs in with (the browser's password manager fills it as the username). */
export function EmailField({
  value,
  onChange,
  hint,
  autoFocus,
  readOnly,
}: {
  value: string;
  onChange(value: string): void;
  hint?: string;
  autoFocus?: boolean;
  readOnly?: boolean;
}) {
  return (
    <Field label="Email" hint={hint}>
      <input
        type="email"
        autoComplete="username"
        value={value}
        onChange={(e) => onChange(e.target.value)}
        readOnly={readOnly}
        required
        maxLength={320}
        autoFocus={autoFocus}
      />
    </Field>
  );
}

/** Why a new password cannot be sent yet, in words; undefined when it can. */
export function newPasswordProblem(password: string, repeat: string): string | undefined {
  if (password.length < MIN_PASSWORD_LENGTH) return `The new password needs at least ${MIN_PASSWORD_LENGTH} characters.`;
  if (password !== repeat) return 'The two new passwords are not the same.';
  return undefined;
}

/** A new password, typed twice so a typo does not lock its holder out. */
export function NewPasswordFields({
  password,
  repeat,
  onPassword,
  onRepeat,
  autoFocus,
}: {
  password: string;
  repeat: string;
  onPassword(value: string): void;
  onRepeat(value: string): void;
  autoFocus?: boolean;
}) {
  return (
    <>
      <Field label="New password" hint={`At least ${MIN_PASSWORD_LENGTH} characters. A passphrase of a few words is easy to remember.`}>
        <input
          type="password"
          autoComplete="new-password"
          value={password}
          onChange={(e) => onPassword(e.target.value)}
          required
          minLength={MIN_PASSWORD_LENGTH}
          maxLength={1024}
          autoFocus={autoFocus}
        />
      </Field>
      <Field label="Repeat the new password">
        <input
          type="password"
          autoComplete="new-password"
          value={repeat}
          onChange={(e) => onRepeat(e.target.value)}
          required
          maxLength={1024}
        />
      </Field>
    </>
  );
}

import type { Role } from '../api/types';
import { Field } from '../components/dialog';
import { ROLES } from './company-shared';

/** The role of a member or an invitation, with what it lets them do. */
export function RoleSelect({ value, onChange }: { value: Role; onChange(role: Role): void }) {
  return (
    <Field label="Role" hint={ROLES.find((r) => r.role === value)?.description}>
      <select value={value} onChange={(event) => onChange(event.target.value as Role)}>
        {ROLES.map((r) => (
          <option key={r.role} value={r.role}>
            {r.label}
          </option>
        ))}
      </select>
    </Field>
  );
}

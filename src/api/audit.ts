import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import type { AuditRecord } from '../store/store.js';
import { principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, Id, Page, PageQuery, Timestamp, iso, pageOf } from './schemas.js';
import { parseTime } from '../domain/time.js';

const AuditRecordSchema = Type.Object(
  {
    id: Id('aud'),
    at: Timestamp,
    actor: Type.Object({
      type: Type.Union([Type.Literal('user'), Type.Literal('key'), Type.Literal('cli'), Type.Literal('system')], {
        description: 'user: a panel session; key: a management key; cli: an operator at the command line.',
      }),
      id: Type.Union([Type.String(), Type.Null()], { description: 'usr_… or key_…; the operating-system user for cli.' }),
      ip: Type.Union([Type.String(), Type.Null()]),
    }),
    action: Type.String({ description: 'What was done: `integration.create`, `key.revoke`, `member.add`, `company.update`, …' }),
    target: Type.Object({ type: Type.String(), id: Type.String() }),
    before: Type.Unknown({ description: 'The target before the change (null when it did not exist). Never a key or a password.' }),
    after: Type.Unknown({ description: 'The target after the change (null when it is gone). Never a key or a password.' }),
  },
  { $id: 'AuditRecord' },
);

const Filter = (description: string) => Type.Optional(Type.String({ minLength: 1, maxLength: 200, description }));

/** /api/v1/audit-log: every change to the company, by whom, from where. */
export async function auditRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  app.get(
    '/audit-log',
    {
      // Every role reads it, as they read integrations and logs; so does a management key
      // with logs:read, for a SIEM to collect it. Records never hold a secret.
      config: { permission: 'logs:read' },
      schema: {
        tags: ['Audit log'],
        summary: 'List audit records',
        description:
          'Every change made through the API, the panel or the command line, written in the same transaction as the change. ' +
          'Newest first. Readable by every member (owner, admin, viewer) and by a management key with the `logs:read` scope. ' +
          '`since` is inclusive, `until` exclusive.',
        querystring: Type.Object({
          ...PageQuery,
          action: Filter('Only this action, e.g. `member.add`.'),
          actor_id: Filter('Only changes by this user or key (usr_… or key_…).'),
          target_id: Filter('Only changes to this target (int_…, key_…, usr_…, cmp_…).'),
          since: Type.Optional(Timestamp),
          until: Type.Optional(Timestamp),
        }),
        response: { 200: Page(AuditRecordSchema), ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const { action, actor_id, target_id, since, until } = request.query;
      const page = await pageOf(
        request.query,
        (query) =>
          deps.store.listAuditLog(companyId, {
            ...query,
            ...(action !== undefined && { action }),
            ...(actor_id !== undefined && { actorId: actor_id }),
            ...(target_id !== undefined && { targetId: target_id }),
            ...(since !== undefined && { since: parseTime(since, 'since') }),
            ...(until !== undefined && { until: parseTime(until, 'until') }),
          }),
        (last) => ({ at: last.at, id: last.id }),
      );
      return { data: page.items.map(presentAuditRecord), next_cursor: page.next_cursor };
    },
  );
}

function presentAuditRecord(record: AuditRecord) {
  return {
    id: record.id,
    at: iso(record.at),
    actor: { type: record.actor.type, id: record.actor.id, ip: record.actor.ip },
    action: record.action,
    target: { type: record.targetType, id: record.targetId },
    before: record.before ?? null,
    after: record.after ?? null,
  };
}

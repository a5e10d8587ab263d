import { Type } from 'typebox';
import type { AppInstance } from '../app-instance.js';
import { AppError } from '../errors.js';
import { MAX_RETENTION_DAYS, type Company } from '../store/store.js';
import { managementFor, principalOf, type ApiDeps } from './context.js';
import { ERROR_RESPONSES, ErrorResponse, Id, Timestamp, iso } from './schemas.js';

const CompanySchema = Type.Object(
  {
    id: Id('cmp'),
    name: Type.String(),
    retention_days: Type.Integer({ description: 'Webhooks and request-log rows older than this are deleted.' }),
    require_two_factor: Type.Boolean({
      description: 'Members must sign in with two-factor to reach the company; without it, its routes answer 403 two_factor_setup_required.',
    }),
    created_at: Timestamp,
    environment: Type.String({ description: 'The deployment this company lives in: development, staging or production.' }),
  },
  { $id: 'Company' },
);

/** /api/v1/company: the caller's company and its settings. */
export async function companyRoutes(app: AppInstance, deps: ApiDeps): Promise<void> {
  const tags = ['Company'];
  const present = (company: Company) => ({
    id: company.id,
    name: company.name,
    retention_days: company.retentionDays,
    require_two_factor: company.requireTwoFactor,
    created_at: iso(company.createdAt),
    environment: deps.config.environment,
  });

  app.get(
    '/company',
    {
      config: { permission: 'integrations:read' },
      schema: {
        tags,
        summary: 'Read the company',
        description: 'The company of the session (X-Company-Id when there are several) or of the management key. Any member or management key.',
        response: { 200: CompanySchema, ...ERROR_RESPONSES },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const company = await deps.store.getCompany(companyId);
      if (!company) throw new AppError('not_found', `No company with id ${companyId}.`);
      return present(company);
    },
  );

  app.patch(
    '/company',
    {
      config: { permission: 'company:manage' },
      schema: {
        tags,
        summary: 'Change the company settings',
        description:
          'Owners only; management keys never. Changes only the fields sent. A shorter retention deletes older webhooks ' +
          'and request-log rows at the next retention run (every few minutes), for good; an integration set to keep ' +
          "longer than the new retention keeps the company's, one set shorter keeps its own. Requiring two-factor sign-in " +
          'is a 409 unless the owner asking has it on; members without it then reach the company only once they turn it on.',
        body: Type.Partial(
          Type.Object({
            name: Type.String({ minLength: 1, maxLength: 200 }),
            retention_days: Type.Integer({ minimum: 1, maximum: MAX_RETENTION_DAYS }),
            require_two_factor: Type.Boolean(),
          }),
          { minProperties: 1 },
        ),
        response: { 200: CompanySchema, ...ERROR_RESPONSES, 409: ErrorResponse },
      },
    },
    async (request) => {
      const { companyId } = principalOf(request);
      const { name, retention_days, require_two_factor } = request.body;
      const updated = await managementFor(deps, request).updateCompany(companyId, {
        ...(name !== undefined && { name }),
        ...(retention_days !== undefined && { retentionDays: retention_days }),
        ...(require_two_factor !== undefined && { requireTwoFactor: require_two_factor }),
      });
      return present(updated);
    },
  );
}

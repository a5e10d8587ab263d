/**
 * The shapes the panel reads from /api/v1, as the OpenAPI document (/api/openapi.json)
 * describes them. Times are ISO-8601 strings in UTC.
 */

export type Role = 'owner' | 'admin' | 'viewer';

export interface Session {
  user: { id: string; email: string };
  companies: { id: string; name: string; role: Role }[];
  csrf_token: string;
  environment: string;
}

import { Type, type TSchema } from 'typebox';
import { decodePageCursor, encodePageCursor, type PageCursor } from '../domain/cursor.js';

/**
 * Shapes shared by every /api/v1 route. They validate requests, type the handlers and
 * become the OpenAPI document: one source for all three.
 */

/** Every error body (contract, "Errors"); every field is listed so none is dropped on the way out. */
export const ErrorResponse = Type.Object(
  {
    error: Type.String({ description: 'A short title.' }),
    message: Type.String({ description: 'What went wrong, for a person.' }),
    code: Type.String({ description: 'A stable snake_case identifier.' }),
    request_id: Type.Optional(Type.String()),
    field: Type.Optional(Type.String({ description: 'The field at fault, when there is one.' })),
  },
  { $id: 'Error' },
);

/** The error responses every authenticated route may give. */
export const ERROR_RESPONSES = {
  400: ErrorResponse,
  401: ErrorResponse,
  403: ErrorResponse,
  404: ErrorResponse,
  429: ErrorResponse,
};

export const Id = (prefix: string, description?: string) =>
  Type.String({ pattern: `^${prefix}_[A-Za-z0-9]{22}$`, description: description ?? `An id (${prefix}_…).` });

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO-8601, UTC.' });
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

/** Query of every list: the same names and bounds everywhere. */
export const PageQuery = {
  limit: Type.Integer({ minimum: 1, maximum: 200, default: 50, description: 'Items per page.' }),
  cursor: Type.Optional(Type.String({ maxLength: 500, description: 'next_cursor of the previous page.' })),
};

/** A page of a list: newest first, `next_cursor` null on the last page. */
export const Page = <T extends TSchema>(item: T) =>
  Type.Object({
    data: Type.Array(item),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page.' }),
  });

/** ms since the epoch to the API's ISO-8601. */
export function iso(ms: number): string;
export function iso(ms: number | null): string | null;
export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export const RoleSchema = Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('viewer')], {
  description: 'owner: everything; admin: integrations and keys; viewer: reads only.',
});

/**
 * An integer or null, as one schema with two types. (A union of two schemas would let
 * Fastify's type coercion turn a refused 0 into null, which means something else.)
 */
export const NullableInteger = (options: { minimum: number; maximum: number; description?: string }) =>
  Type.Unsafe<number | null>({ type: ['integer', 'null'], ...options });

/**
 * One page of a list, the same way on every route: the store is asked for one row more
 * than `limit`, which tells whether another page follows, and the cursor is the sort key
 * (time, id) of the last row shown.
 */
export async function pageOf<T>(
  query: { limit: number; cursor?: string },
  fetch: (page: { limit: number; cursor?: PageCursor }) => Promise<T[]>,
  sortKey: (item: T) => PageCursor,
): Promise<{ items: T[]; next_cursor: string | null }> {
  const rows = await fetch({
    limit: query.limit + 1,
    ...(query.cursor !== undefined && { cursor: decodePageCursor(query.cursor) }),
  });
  const items = rows.slice(0, query.limit);
  const last = items.at(-1);
  return { items, next_cursor: rows.length > query.limit && last ? encodePageCursor(sortKey(last)) : null };
}

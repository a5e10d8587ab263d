import { AppError } from '../errors.js';

/**
 * An ISO-8601 time from a request, as ms since the epoch. The schemas' `date-time` format
 * lets through forms Date cannot read (a leap second, `+01` without minutes); those are a
 * 400 naming the field, never NaN passed on to a query (a wrong empty page, or a 500) or a
 * key that never expires.
 */
export function parseTime(value: string, field: string): number {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) {
    throw new AppError('invalid_request', `${field} must be a time such as 2026-01-31T12:00:00Z; "${value}" cannot be read.`, {
      field,
    });
  }
  return ms;
}

/** parseTime for an optional value. */
export function parseOptionalTime(value: string | undefined, field: string): number | undefined {
  return value === undefined ? undefined : parseTime(value, field);
}

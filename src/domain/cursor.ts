import { AppError } from '../errors.js';

/** A position in a newest-first list: the last row's time and uuid (ties broken by uuid). */
export interface Cursor {
  receivedAt: number;
  uuid: string;
}

/** Opaque to clients: base64url of `<ms>.<uuid>`. */
export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(`${cursor.receivedAt}.${cursor.uuid}`).toString('base64url');
}

export function decodeCursor(text: string): Cursor {
  const match = /^(\d{1,15})\.([0-9a-f-]{36})$/.exec(Buffer.from(text, 'base64url').toString('latin1'));
  if (!match) throw new AppError('invalid_request', 'The cursor is not valid; use next_cursor from a previous page.');
  return { receivedAt: Number(match[1]), uuid: match[2]! };
}

/** The cursor of a management list: the last item's sort time and id, opaque to clients. */
export interface PageCursor {
  at: number;
  id: string;
}

export function encodePageCursor(cursor: PageCursor): string {
  return Buffer.from(`${cursor.at}.${cursor.id}`, 'latin1').toString('base64url');
}

export function decodePageCursor(text: string): PageCursor {
  const match = /^(\d{1,15})\.([A-Za-z0-9_-]{1,100})$/.exec(Buffer.from(text, 'base64url').toString('latin1'));
  if (!match) throw new AppError('invalid_request', 'The cursor is not valid; use next_cursor from a previous page.', { field: 'cursor' });
  return { at: Number(match[1]), id: match[2]! };
}

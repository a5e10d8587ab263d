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

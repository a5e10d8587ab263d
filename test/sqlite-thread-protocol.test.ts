import { describe, expect, test } from 'vitest';
import { detachBuffers, reviveBuffers } from '../src/store/sqlite/thread-protocol.js';

/** What crosses to the SQLite threads: bytes of their own size, posted; Buffers again on arrival. */
describe('the SQLite threads’ message values', () => {
  test('a Buffer that views a larger ArrayBuffer is copied to one of its own; a whole one is kept', () => {
    const pooled = Buffer.from('a small body'); // from Node's shared pool: a view
    expect(pooled.buffer.byteLength).toBeGreaterThan(pooled.byteLength);
    const whole = Buffer.alloc(16, 1);
    const value = { webhooks: [{ rawBody: pooled, event: 'e', n: 1 }, { rawBody: whole, event: 'f', n: null }], when: 5 };
    const detached = detachBuffers(value);
    const [first, second] = detached.webhooks;
    expect(first!.rawBody).not.toBe(pooled);
    expect(first!.rawBody.equals(pooled)).toBe(true);
    expect(first!.rawBody.buffer.byteLength).toBe(pooled.byteLength);
    expect(second!.rawBody).toBe(whole);
    // Only what held a changed buffer is copied; the caller's value is untouched.
    expect(second).toBe(value.webhooks[1]);
    expect(value.webhooks[0]!.rawBody).toBe(pooled);
    expect(detached).toEqual({ webhooks: [{ rawBody: pooled, event: 'e', n: 1 }, { rawBody: whole, event: 'f', n: null }], when: 5 });
  });

  test('a value without bytes is returned as it is', () => {
    const value = { a: [1, 'two', { three: [3] }], b: null, c: undefined };
    expect(detachBuffers(value)).toBe(value);
    expect(reviveBuffers(value)).toBe(value);
  });

  test('with a transfer list, every buffer is listed once posted', () => {
    const transfer: ArrayBuffer[] = [];
    const detached = detachBuffers([Buffer.from('x'), [Buffer.alloc(8)]], transfer);
    expect(transfer).toHaveLength(2);
    expect(transfer[0]).toBe((detached[0] as Buffer).buffer);
  });

  test('plain byte arrays arrive as Buffers over the same memory', () => {
    const bytes = new Uint8Array([1, 2, 3]);
    const revived = reviveBuffers({ rows: [{ raw_body: bytes, id: 'w' }] });
    const raw = revived.rows[0]!.raw_body;
    expect(Buffer.isBuffer(raw)).toBe(true);
    expect(raw.buffer).toBe(bytes.buffer);
    expect([...raw]).toEqual([1, 2, 3]);
  });
});

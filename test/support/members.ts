import { newId } from '../../src/domain/ids.js';
import type { Role, Store } from '../../src/store/store.js';

/**
 * A member who never signs in, made in the store directly: no password hashing (scrypt
 * takes most of a second), for tests that only need someone to be in the company.
 */
export async function quickMember(store: Store, companyId: string, role: Role): Promise<{ userId: string; email: string }> {
  const userId = newId('usr');
  const email = `${role}-${userId.slice(4).toLowerCase()}@example.com`;
  const now = Date.now();
  const audit = { actor: { type: 'cli' as const, id: 'test', ip: null }, action: 'member.add', targetType: 'user', targetId: userId, at: now };
  await store.addUser(companyId, { id: userId, email, passwordHash: 'never-signs-in', createdAt: now }, role, audit);
  return { userId, email };
}

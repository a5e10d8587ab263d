import type { AuditEvent, AuditQuery, AuditRecord, AuditStore } from '../audit-store.js';
import { insertAudit, listAuditLog } from '../queries/audit.js';
import { KyselyStoreBase } from './store-base.js';

/** The audit log on Kysely (the AuditStore part of KyselyStore). */
export class KyselyAuditStore extends KyselyStoreBase implements AuditStore {
  async recordAudit(companyId: string, audit: AuditEvent): Promise<void> {
    await insertAudit(this.db, companyId, audit);
  }

  listAuditLog(companyId: string, query: AuditQuery): Promise<AuditRecord[]> {
    return listAuditLog(this.db, companyId, query);
  }
}

import type { Actor, AuditEvent } from '../audit-store.js';
import type {
  ErasureConfirmation,
  ErasureCounts,
  ErasureEnd,
  ErasureRecord,
  ErasureScanPage,
  ErasureScanQuery,
  ErasureStep,
  ErasureStore,
  ErasureTarget,
  ErasureWork,
  NewErasure,
} from '../erasure-store.js';
import * as erasures from '../queries/erasures.js';
import { KyselyStoreBase } from './store-base.js';

/** Erasure by data subject on Kysely (the ErasureStore part of KyselyStore). */
export class KyselyErasureStore extends KyselyStoreBase implements ErasureStore {
  createErasure(erasure: NewErasure, audit: AuditEvent): Promise<ErasureRecord> {
    return erasures.createErasure(this.db, erasure, audit);
  }
  getErasure(companyId: string, id: string): Promise<ErasureRecord | undefined> {
    return erasures.getErasure(this.db, companyId, id);
  }
  listErasures(companyId: string, query: { limit: number; before?: string }): Promise<ErasureRecord[]> {
    return erasures.listErasures(this.db, companyId, query);
  }
  confirmErasure(companyId: string, id: string, confirmation: ErasureConfirmation): Promise<ErasureRecord | 'not_found' | 'not_previewed'> {
    return erasures.confirmErasure(this.db, companyId, id, confirmation);
  }
  takeErasure(at: number, token: string, leaseMs: number): Promise<ErasureWork | undefined> {
    return erasures.takeErasure(this.db, at, token, leaseMs);
  }
  scanErasure(companyId: string, query: ErasureScanQuery): Promise<ErasureScanPage> {
    return erasures.scanErasure(this.db, this.types, companyId, query);
  }
  countErasureLinks(companyId: string, webhooks: readonly ErasureTarget[]): Promise<ErasureCounts> {
    return erasures.countErasureLinks(this.db, companyId, webhooks);
  }
  erasureStep(companyId: string, step: ErasureStep): Promise<boolean> {
    return erasures.erasureStep(this.db, this.types, companyId, step);
  }
  finishErasure(companyId: string, id: string, token: string, end: ErasureEnd): Promise<boolean> {
    return erasures.finishErasure(this.db, companyId, id, token, end);
  }

  // Operator lookup for the CLI, which is given bare ids: which company owns this?
  async companyOfErasure(erasureId: string): Promise<string | undefined> {
    const row = await this.db.selectFrom('erasures').select('company_id').where('id', '=', erasureId).executeTakeFirst();
    return row?.company_id;
  }
}

import type { LogConfig } from 'kysely';

/** Sees each statement run, with how long it took (ms), for tests and benchmarks. */
export type QueryObserver = (query: { sql: string; parameters: readonly unknown[]; ms: number }) => void;

/** Kysely's log hook for an observer of every statement, or none. */
export function queryLog(observer: QueryObserver | undefined): LogConfig | undefined {
  if (!observer) return undefined;
  return (event) => {
    if (event.level === 'query') observer({ sql: event.query.sql, parameters: event.query.parameters, ms: event.queryDurationMillis });
  };
}

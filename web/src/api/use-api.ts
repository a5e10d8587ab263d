import { useCallback, useEffect, useRef, useState } from 'react';
import type { ApiError } from './client';
import { api, type Page } from './client';

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload(): void;
}

/**
 * Loads `load()` when `deps` change (the company included, by the caller) and keeps the
 * last answer while reloading, so lists do not flash empty.
 */
export function useApi<T>(load: () => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<ApiError>();
  const [loading, setLoading] = useState(true);
  const [generation, setGeneration] = useState(0);
  const latest = useRef(0);

  useEffect(() => {
    const call = ++latest.current;
    setLoading(true);
    load()
      .then((value) => {
        if (call !== latest.current) return;
        setData(value);
        setError(undefined);
      })
      .catch((e: ApiError) => call === latest.current && setError(e))
      .finally(() => call === latest.current && setLoading(false));
  }, [...deps, generation]);

  const reload = useCallback(() => setGeneration((g) => g + 1), []);
  return { data, error, loading, reload };
}

export interface Paged<T> extends Loaded<T[]> {
  hasMore: boolean;
  loadingMore: boolean;
  loadMore(): void;
}

/** A cursor-paged list: the first page when `query` changes, then more pages on demand. */
export function usePagedList<T>(path: string, query: Record<string, string | number | undefined>, deps: readonly unknown[]): Paged<T> {
  const [items, setItems] = useState<T[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  const [moreError, setMoreError] = useState<ApiError>();
  const first = useApi(() => api.get<Page<T>>(path, query), [path, ...deps]);

  useEffect(() => {
    if (!first.data) return;
    setItems(first.data.data);
    setCursor(first.data.next_cursor);
    setMoreError(undefined);
  }, [first.data]);

  const loadMore = useCallback(() => {
    if (!cursor || loadingMore) return;
    setLoadingMore(true);
    api
      .get<Page<T>>(path, { ...query, cursor })
      .then((page) => {
        setItems((previous) => [...previous, ...page.data]);
        setCursor(page.next_cursor);
      })
      .catch((e: ApiError) => setMoreError(e))
      .finally(() => setLoadingMore(false));
  }, [cursor, loadingMore, path, ...deps]);

  return {
    data: first.data ? items : undefined,
    error: first.error ?? moreError,
    loading: first.loading,
    reload: first.reload,
    hasMore: cursor !== null,
    loadingMore,
    loadMore,
  };
}

/**
 * Calls `refresh` every `ms` while the tab is visible: for the parts of a page that show
 * live state (a destination's last success and backlog), as the webhook list's live tail
 * keeps itself current.
 */
export function useEvery(ms: number, refresh: () => void): void {
  const latest = useRef(refresh);
  latest.current = refresh;
  useEffect(() => {
    const timer = setInterval(() => document.visibilityState === 'visible' && latest.current(), ms);
    return () => clearInterval(timer);
  }, [ms]);
}

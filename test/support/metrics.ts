import parsePrometheusTextFormat, { type ParsedFamily, type ParsedSample } from 'parse-prometheus-text-format';
import type { AppInstance } from '../../src/app.js';

/**
 * A scrape of /metrics, parsed by a Prometheus text-format parser (not by our own regular
 * expressions), with the look-ups tests make: a counter's or gauge's value, a histogram's
 * count and sum, by labels.
 *
 * parse-prometheus-text-format folds a histogram's series into one and drops their labels
 * (its flattenMetrics keeps `le` alone), so the text is parsed twice: as it is, for each
 * family's type and help, and with the histograms' TYPE lines left out, which the parser
 * then reads as their three series (`_bucket`, `_sum`, `_count`), labels and all.
 */
export class Scrape {
  /** Each family as exported: its type and help (a histogram's samples are not usable here). */
  readonly families: ReadonlyMap<string, ParsedFamily>;
  /** Each series with its samples: counters, gauges, and histograms as NAME_bucket, NAME_sum, NAME_count. */
  private readonly series: ReadonlyMap<string, ParsedFamily>;

  constructor(readonly text: string) {
    this.families = new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family]));
    // Each label set's histogram comes as its buckets, sum and count: one series repeats, so join them.
    const series = new Map<string, ParsedFamily>();
    for (const family of parsePrometheusTextFormat(text.replace(/^# TYPE \S+ histogram$/gm, ''))) {
      const seen = series.get(family.name);
      if (seen) seen.metrics.push(...family.metrics);
      else series.set(family.name, family);
    }
    this.series = series;
  }

  family(name: string): ParsedFamily {
    const family = this.families.get(name);
    if (family === undefined) throw new Error(`no ${name} in /metrics:\n${this.text}`);
    return family;
  }

  has(name: string): boolean {
    return this.families.has(name);
  }

  /** The samples of a counter, a gauge or a histogram's series whose labels include `labels`. */
  samples(name: string, labels: Record<string, string> = {}): ParsedSample[] {
    const series = this.series.get(name);
    if (series === undefined) {
      // A family with labels and nothing observed yet has no series at all.
      if (this.has(name.replace(/_(?:bucket|sum|count)$/, '')) || this.has(name)) return [];
      throw new Error(`no ${name} in /metrics:\n${this.text}`);
    }
    return series.metrics.filter((sample) => Object.entries(labels).every(([label, value]) => sample.labels?.[label] === value));
  }

  /** A counter or gauge: the sum of its samples with these labels (0 when none has them). */
  value(name: string, labels: Record<string, string> = {}): number {
    return this.samples(name, labels).reduce((total, sample) => total + Number(sample.value), 0);
  }

  /** A histogram's observations with these labels, and their sum. */
  histogram(name: string, labels: Record<string, string> = {}): { count: number; sum: number } {
    if (this.family(name).type !== 'HISTOGRAM') throw new Error(`${name} is a ${this.family(name).type}, not a histogram`);
    return { count: this.value(`${name}_count`, labels), sum: this.value(`${name}_sum`, labels) };
  }

  /** Every label value of every sample, with its series and label name. */
  labelValues(): Array<{ metric: string; label: string; value: string }> {
    return [...this.series.values()].flatMap((family) =>
      family.metrics.flatMap((sample) => Object.entries(sample.labels ?? {}).map(([label, value]) => ({ metric: family.name, label, value }))),
    );
  }
}

/** GET /metrics through app.inject; fails unless it answers 200 in the Prometheus text format. */
export async function scrape(app: AppInstance, headers: Record<string, string> = {}): Promise<Scrape> {
  const response = await app.inject({ method: 'GET', url: '/metrics', headers });
  if (response.statusCode !== 200) throw new Error(`/metrics answered ${response.statusCode}: ${response.body}`);
  if (!String(response.headers['content-type']).startsWith('text/plain; version=0.0.4')) {
    throw new Error(`/metrics is not Prometheus text: ${response.headers['content-type']}`);
  }
  return new Scrape(response.body);
}

/** GET /metrics of a listening server. */
export async function scrapeUrl(url: string, headers: Record<string, string> = {}): Promise<Scrape> {
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(5_000) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}: ${text}`);
  return new Scrape(text);
}

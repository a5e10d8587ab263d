import { useCallback, useId, useState, type ReactNode } from 'react';
import '../pages/logs.css';

/**
 * Small charts drawn as SVG elements (no chart library) over time buckets: stacked bars
 * (one coloured segment per series) or lines, a <title> tooltip on every mark, a legend,
 * and the same numbers as a table for screen readers and for copying.
 * Colours come from the series' class (see logs.css), never from inline styles.
 */

export interface ChartSeries {
  key: string;
  label: string;
  /** A class that sets `fill` (a line's `stroke` too, and `background-color` for the legend swatch). */
  className: string;
}

export interface ChartBar {
  key: string;
  /** Short axis label ("14:05"). */
  label: string;
  /** Long label for tooltips and the table ("Mon 3 Jun, 14:05"). */
  title: string;
  /** A line chart leaves a gap where a value is null or absent. */
  values: Record<string, number | null>;
}

/** The drawing's width until the chart has been measured; then its own width in pixels. */
const WIDTH = 800;
const HEIGHT = 240;
const MARGIN = { left: 44, right: 8, top: 10, bottom: 26 };
const MAX_LABELS = 8;
/** Room a time label needs on the axis, in pixels. */
const LABEL_WIDTH = 64;

/**
 * The chart's width in CSS pixels, measured as it changes: the drawing is made for that
 * width (one unit a pixel), so its labels keep their size on a phone instead of shrinking
 * with a scaled drawing (5 px at 390 px wide), and fewer time labels are shown where fewer fit.
 */
function useChartWidth(): { ref: (element: HTMLElement | null) => void; width: number } {
  const [width, setWidth] = useState(WIDTH);
  const ref = useCallback((element: HTMLElement | null) => {
    if (!element) return;
    const measure = () => {
      const measured = Math.round(element.getBoundingClientRect().width);
      if (measured > 0) setWidth(measured);
    };
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    // React 19 calls a ref's returned function when the element goes.
    return () => observer.disconnect();
  }, []);
  return { ref, width };
}

/** One bar per bucket, its series stacked; the table adds each bucket's total. */
export function StackedBarChart({ title, series, bars }: { title: string; series: ChartSeries[]; bars: ChartBar[] }) {
  const totals = bars.map((bar) => series.reduce((sum, s) => sum + (bar.values[s.key] ?? 0), 0));
  const { ref, width } = useChartWidth();
  const frame = chartFrame(bars.length, Math.max(1, ...totals), width);
  const barWidth = frame.slot >= 4 ? Math.min(frame.slot * 0.8, 48) : frame.slot;
  return (
    <ChartFigure
      figureRef={ref}
      title={title}
      series={series}
      bars={bars}
      frame={frame}
      table={{ values: (bar, s) => (bar.values[s.key] ?? 0).toLocaleString('en'), total: (index) => totals[index]! }}
    >
      <g className="chart-bars">
        {bars.map((bar, index) => {
          const x = frame.x(index) - barWidth / 2;
          let base = 0;
          return (
            <g key={bar.key} className="chart-bar" data-total={totals[index]}>
              {series.map((s) => {
                const value = bar.values[s.key] ?? 0;
                if (value <= 0) return null;
                const from = base;
                base += value;
                return (
                  <rect
                    key={s.key}
                    className={`chart-segment ${s.className}`}
                    x={x}
                    width={barWidth}
                    y={frame.y(base)}
                    height={Math.max(1, frame.y(from) - frame.y(base))}
                  >
                    <title>{`${bar.title}: ${value.toLocaleString('en')} ${s.label.toLowerCase()} (of ${totals[index]!.toLocaleString('en')})`}</title>
                  </rect>
                );
              })}
            </g>
          );
        })}
      </g>
    </ChartFigure>
  );
}

/**
 * Lines over the same time buckets (latency percentiles, say): a missing value (null or
 * absent) leaves a gap rather than a drop to zero. `unit` follows the numbers of the
 * tooltips and the table; the axis has none (say it in the chart's heading).
 */
export function LineChart({ title, series, bars, unit }: { title: string; series: ChartSeries[]; bars: ChartBar[]; unit: string }) {
  const present = (bar: ChartBar, key: string) => (typeof bar.values[key] === 'number' ? bar.values[key] : undefined);
  const highest = Math.max(1, ...bars.flatMap((bar) => series.map((s) => present(bar, s.key) ?? 0)));
  const { ref, width } = useChartWidth();
  const frame = chartFrame(bars.length, highest, width);
  const withUnit = (value: number) => `${value.toLocaleString('en')} ${unit}`;
  const cell = (bar: ChartBar, s: ChartSeries) => {
    const value = present(bar, s.key);
    return value === undefined ? '—' : withUnit(value);
  };
  return (
    <ChartFigure figureRef={ref} title={title} series={series} bars={bars} frame={frame} table={{ values: cell }}>
      <g className="chart-lines">
        {series.map((s) => (
          <g key={s.key} className={`chart-line ${s.className}`} data-series={s.key}>
            {runs(bars, (bar) => present(bar, s.key) !== undefined).map((run) => (
              <polyline
                key={run[0]}
                points={run.map((index) => `${frame.x(index)},${frame.y(present(bars[index]!, s.key)!)}`).join(' ')}
              />
            ))}
            {bars.map((bar, index) => {
              const value = present(bar, s.key);
              return value === undefined ? null : (
                <circle key={bar.key} className="chart-point" cx={frame.x(index)} cy={frame.y(value)} r={3}>
                  <title>{`${bar.title}: ${s.label} ${withUnit(value)}`}</title>
                </circle>
              );
            })}
          </g>
        ))}
      </g>
    </ChartFigure>
  );
}

interface Frame {
  /** Of the drawing, in its units (CSS pixels once measured). */
  width: number;
  step: number;
  slot: number;
  /** The middle of bucket `index`. */
  x(index: number): number;
  y(value: number): number;
}

function chartFrame(count: number, highest: number, width: number): Frame {
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const step = niceStep(highest / 4);
  const top = step * 4;
  const slot = count === 0 ? plotWidth : plotWidth / count;
  return {
    width,
    step,
    slot,
    x: (index) => MARGIN.left + index * slot + slot / 2,
    y: (value) => MARGIN.top + plotHeight - (value / top) * plotHeight,
  };
}

/** Indexes of consecutive bars that pass `keep`, one array per unbroken run. */
function runs(bars: ChartBar[], keep: (bar: ChartBar) => boolean): number[][] {
  const all: number[][] = [];
  let current: number[] = [];
  bars.forEach((bar, index) => {
    if (keep(bar)) current.push(index);
    else if (current.length > 0) {
      all.push(current);
      current = [];
    }
  });
  if (current.length > 0) all.push(current);
  return all;
}

/** The frame every chart shares: grid and axis, time labels, legend, and the numbers as a table. */
function ChartFigure({
  figureRef,
  title,
  series,
  bars,
  frame,
  table,
  children,
}: {
  figureRef: (element: HTMLElement | null) => void;
  title: string;
  series: ChartSeries[];
  bars: ChartBar[];
  frame: Frame;
  /** A cell of the table; with `total`, a Total column too. */
  table: { values(bar: ChartBar, s: ChartSeries): string; total?(index: number): number };
  children: ReactNode;
}) {
  const titleId = useId();
  const labels = Math.max(2, Math.min(MAX_LABELS, Math.floor((frame.width - MARGIN.left) / LABEL_WIDTH)));
  const labelEvery = Math.max(1, Math.ceil(bars.length / labels));
  // Empty buckets stay out of the table: it lists what happened.
  const rows = bars
    .map((bar, index) => ({ bar, index }))
    .filter(({ bar, index }) => (table.total ? table.total(index) > 0 : series.some((s) => typeof bar.values[s.key] === 'number')));
  return (
    <figure className="chart" ref={figureRef}>
      <svg className="chart-svg" viewBox={`0 0 ${frame.width} ${HEIGHT}`} role="img" aria-labelledby={titleId} preserveAspectRatio="xMidYMid meet">
        <title id={titleId}>{title}</title>
        <g className="chart-grid">
          {[0, 1, 2, 3, 4].map((i) => (
            <g key={i}>
              <line
                x1={MARGIN.left}
                x2={frame.width - MARGIN.right}
                y1={frame.y(frame.step * i)}
                y2={frame.y(frame.step * i)}
                className={i === 0 ? 'chart-axis' : 'chart-gridline'}
              />
              <text x={MARGIN.left - 6} y={frame.y(frame.step * i)} className="chart-tick" textAnchor="end" dominantBaseline="middle">
                {compact(frame.step * i)}
              </text>
            </g>
          ))}
        </g>
        {children}
        <g className="chart-labels">
          {bars.map((bar, index) =>
            index % labelEvery === 0 ? (
              <text key={bar.key} x={frame.x(index)} y={HEIGHT - MARGIN.bottom + 16} className="chart-tick" textAnchor="middle">
                {bar.label}
              </text>
            ) : null,
          )}
        </g>
      </svg>
      <figcaption>
        <ul className="chart-legend" aria-label="Legend">
          {series.map((s) => (
            <li key={s.key}>
              <span className={`legend-swatch ${s.className}`} aria-hidden="true" />
              {s.label}
            </li>
          ))}
        </ul>
      </figcaption>
      <details className="chart-table">
        <summary>Show as a table</summary>
        <div className="table-wrap">
          <table>
            <caption className="visually-hidden">{title}</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                {series.map((s) => (
                  <th scope="col" key={s.key} className="num">
                    {s.label}
                  </th>
                ))}
                {table.total && (
                  <th scope="col" className="num">
                    Total
                  </th>
                )}
              </tr>
            </thead>
            <tbody>
              {rows.map(({ bar, index }) => (
                <tr key={bar.key}>
                  <th scope="row">{bar.title}</th>
                  {series.map((s) => (
                    <td key={s.key} className="num">
                      {table.values(bar, s)}
                    </td>
                  ))}
                  {table.total && <td className="num">{table.total(index).toLocaleString('en')}</td>}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}

/** 1, 2, 5, 10, 20, 50…: a round step at least `rough`, and a whole number. */
function niceStep(rough: number): number {
  if (rough <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(rough));
  const fraction = rough / power;
  const nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return Math.max(1, Math.round(nice * power));
}

function compact(value: number): string {
  return new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 1 }).format(value);
}

import { useId } from 'react';
import '../pages/logs.css';

/**
 * A small stacked bar chart drawn as SVG elements (no chart library): one bar per time
 * bucket, one coloured segment per series, a <title> tooltip on every segment, a legend,
 * and the same numbers as a table for screen readers and for copying.
 * Colours come from the series' class (see logs.css), never from inline styles.
 */

export interface ChartSeries {
  key: string;
  label: string;
  /** A class that sets `fill` (and `background-color` for the legend swatch). */
  className: string;
}

export interface ChartBar {
  key: string;
  /** Short axis label ("14:05"). */
  label: string;
  /** Long label for tooltips and the table ("Mon 3 Jun, 14:05"). */
  title: string;
  values: Record<string, number>;
}

const WIDTH = 800;
const HEIGHT = 240;
const MARGIN = { left: 44, right: 8, top: 10, bottom: 26 };
const MAX_LABELS = 8;

export function StackedBarChart({ title, series, bars }: { title: string; series: ChartSeries[]; bars: ChartBar[] }) {
  const titleId = useId();
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const totals = bars.map((bar) => series.reduce((sum, s) => sum + (bar.values[s.key] ?? 0), 0));
  const step = niceStep(Math.max(1, ...totals) / 4);
  const top = step * 4;
  const slot = bars.length === 0 ? plotWidth : plotWidth / bars.length;
  const barWidth = slot >= 4 ? Math.min(slot * 0.8, 48) : slot;
  const labelEvery = Math.max(1, Math.ceil(bars.length / MAX_LABELS));
  const y = (value: number) => MARGIN.top + plotHeight - (value / top) * plotHeight;

  return (
    <figure className="chart">
      <svg
        className="chart-svg"
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-labelledby={titleId}
        preserveAspectRatio="xMidYMid meet"
      >
        <title id={titleId}>{title}</title>
        <g className="chart-grid">
          {[0, 1, 2, 3, 4].map((i) => (
            <g key={i}>
              <line x1={MARGIN.left} x2={WIDTH - MARGIN.right} y1={y(step * i)} y2={y(step * i)} className={i === 0 ? 'chart-axis' : 'chart-gridline'} />
              <text x={MARGIN.left - 6} y={y(step * i)} className="chart-tick" textAnchor="end" dominantBaseline="middle">
                {compact(step * i)}
              </text>
            </g>
          ))}
        </g>
        <g className="chart-bars">
          {bars.map((bar, index) => {
            const x = MARGIN.left + index * slot + (slot - barWidth) / 2;
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
                      y={y(base)}
                      height={Math.max(1, y(from) - y(base))}
                    >
                      <title>{`${bar.title}: ${value.toLocaleString('en')} ${s.label.toLowerCase()} (of ${totals[index]!.toLocaleString('en')})`}</title>
                    </rect>
                  );
                })}
              </g>
            );
          })}
        </g>
        <g className="chart-labels">
          {bars.map((bar, index) =>
            index % labelEvery === 0 ? (
              <text
                key={bar.key}
                x={MARGIN.left + index * slot + slot / 2}
                y={HEIGHT - MARGIN.bottom + 16}
                className="chart-tick"
                textAnchor="middle"
              >
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
                <th scope="col" className="num">
                  Total
                </th>
              </tr>
            </thead>
            <tbody>
              {bars.map((bar, index) =>
                totals[index] === 0 ? null : (
                  <tr key={bar.key}>
                    <th scope="row">{bar.title}</th>
                    {series.map((s) => (
                      <td key={s.key} className="num">
                        {(bar.values[s.key] ?? 0).toLocaleString('en')}
                      </td>
                    ))}
                    <td className="num">{totals[index]!.toLocaleString('en')}</td>
                  </tr>
                ),
              )}
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

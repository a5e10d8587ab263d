import { useMemo } from 'react';
import * as QRCode from 'qrcode';

/** The quiet zone around a QR code, in modules, as the standard asks. */
const QUIET_ZONE = 4;

/**
 * `text` as a QR code: the `qrcode` package computes the module matrix and React draws it
 * as SVG rectangles, one per run of dark modules in a row. No innerHTML and no data: URL,
 * so the panel's Content-Security-Policy stays as strict as it is.
 */
export function QrCode({ text, label }: { text: string; label: string }) {
  const drawing = useMemo(() => {
    try {
      return darkRuns(QRCode.create(text, { errorCorrectionLevel: 'M' }).modules);
    } catch {
      return undefined; // too long for a QR code: the caller shows the text as well
    }
  }, [text]);
  if (!drawing) return null;
  const side = drawing.size + 2 * QUIET_ZONE;
  return (
    <svg className="qr-code" viewBox={`0 0 ${side} ${side}`} role="img" aria-label={label} shapeRendering="crispEdges" data-modules={drawing.size}>
      <rect width={side} height={side} fill="#fff" />
      {drawing.runs.map(({ x, y, width }) => (
        <rect key={`${x},${y}`} x={x + QUIET_ZONE} y={y + QUIET_ZONE} width={width} height={1} fill="#000" />
      ))}
    </svg>
  );
}

/** The dark modules of each row, merged into runs: a few hundred rectangles instead of a thousand. */
function darkRuns(modules: { size: number; get(row: number, col: number): number }) {
  const runs: { x: number; y: number; width: number }[] = [];
  for (let y = 0; y < modules.size; y++) {
    for (let x = 0; x < modules.size; x++) {
      if (!modules.get(y, x)) continue;
      const start = x;
      while (x + 1 < modules.size && modules.get(y, x + 1)) x++;
      runs.push({ x: start, y, width: x - start + 1 });
    }
  }
  return { size: modules.size, runs };
}

/** Debian's Chromium, which the browser tests drive (INTAKE_CHROMIUM points elsewhere). */
export const CHROMIUM = process.env.INTAKE_CHROMIUM ?? '/usr/bin/chromium';

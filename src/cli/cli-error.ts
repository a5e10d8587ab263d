/**
 * A failure the CLI explains in one line and exits on (status 1), without a stack trace:
 * a refused key, an intake that cannot be reached, an option that makes no sense.
 */
export class CliError extends Error {
  override readonly name = 'CliError';
}

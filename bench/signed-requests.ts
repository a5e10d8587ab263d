import { createHmac } from 'node:crypto';
import { writeFileSync } from 'node:fs';

/**
 * Requests signed as a provider signs them, each body different from every other the run
 * sent. Intake takes a copy of a signed request (the same signature over the same bytes)
 * as a replay within 24 hours (issue 33, finding 10), so a target that sent one signed body
 * again and again would measure replays, not webhooks stored. wrk cannot sign (no HMAC in
 * its Lua), so each run gets the signatures made beforehand, and bench/wrk/post-each.lua
 * builds each body from the template and its number.
 */
export class SignedRequests {
  /** Bodies made so far: each run starts where the last ended, so none repeats. */
  private made = 0;

  constructor(
    /** The provider's signature header (`x-hub-signature-256`). */
    readonly header: string,
    private readonly secret: string,
    /** A JSON object's bytes; each request's body is this with a field of its own in front. */
    private readonly template: Buffer,
  ) {
    if (template[0] !== 0x7b) throw new Error('the template must be a JSON object');
  }

  /**
   * Writes the next `count` requests' signatures to `path`, one a line after the first
   * body's number, and the template's rest to `path.body`: body n is
   * `{"bench_request":"<n, 12 digits>",` and the rest, the same size for every n.
   */
  write(path: string, count: number): void {
    const rest = this.template.subarray(1);
    const first = this.made;
    const signatures: string[] = [];
    for (let i = 0; i < count; i++) {
      const body = Buffer.concat([Buffer.from(`{"bench_request":"${String(this.made++).padStart(12, '0')}",`), rest]);
      signatures.push(`sha256=${createHmac('sha256', this.secret).update(body).digest('hex')}`);
    }
    writeFileSync(`${path}.body`, rest);
    writeFileSync(path, `${first}\n${signatures.join('\n')}\n`);
  }
}

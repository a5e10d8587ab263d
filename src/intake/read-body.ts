import type { Readable } from 'node:stream';
import { AppError } from '../errors.js';

/**
 * Reads a request body into one Buffer, refusing it (413) as soon as it passes `limit`,
 * without buffering the excess. A declared Content-Length over the limit is refused
 * before a byte is read.
 */
export function readBody(stream: Readable | undefined, declaredLength: string | undefined, limit: number): Promise<Buffer> {
  const tooLarge = () => new AppError('payload_too_large', `The request body is larger than the limit of ${limit} bytes.`);
  if (declaredLength !== undefined && Number(declaredLength) > limit) return Promise.reject(tooLarge());
  if (stream === undefined) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        stream.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = () => {
      cleanup();
      reject(new AppError('invalid_request', 'The request body was not received completely.'));
    };
    const cleanup = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('aborted', onError);
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('aborted', onError);
  });
}

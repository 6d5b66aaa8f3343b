/**
 * Consuming a response body chunk by chunk without `for await`: on a paced stream the async
 * iterator's promise and generator step per chunk cost more than the relay's own work on it.
 */
import { finished, type Readable } from 'node:stream';

/**
 * Hands each chunk of `body` to `onChunk` as it arrives (flowing mode), with no promise or
 * async-iterator step per chunk. `onChunk` answers true to stop reading, false to go on, or a
 * promise of either, during which the body is paused (backpressure, a hold extension). Resolves
 * once the body ended or reading stopped; rejects as `for await` would: the body failed, was
 * destroyed or closed early, or `onChunk` threw.
 */
export function eachChunk(body: Readable, onChunk: (chunk: Buffer) => boolean | Promise<boolean>): Promise<void> {
  return new Promise((resolve, reject) => {
    let over = false;
    const finish = (err?: unknown): void => {
      if (over) return;
      over = true;
      body.off('data', onData);
      body.pause();
      if (err === undefined) resolve();
      else reject(err);
    };
    const onData = (chunk: Buffer): void => {
      let next: boolean | Promise<boolean>;
      try {
        next = onChunk(chunk);
      } catch (err) {
        finish(err);
        return;
      }
      if (next === false) return;
      if (next === true) {
        finish();
        return;
      }
      body.pause();
      next.then(
        (stop) => {
          if (stop) finish();
          else if (!over) body.resume();
        },
        (err: unknown) => finish(err),
      );
    };
    // The listener `finished` leaves behind keeps a late error from going unhandled.
    finished(body, (err) => finish(err ?? undefined));
    body.on('data', onData);
  });
}

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
  return new Promise((resolve, reject) => new ChunkReading(body, onChunk, resolve, reject).start());
}

/**
 * One body's reading. Its callbacks are its methods, bound: a closure made per stream loses its
 * optimized code at each full collection once its last instance is gone, and is compiled again
 * (docs/gateway.md, "Pretenuring"); a bound method runs the one compiled method.
 */
class ChunkReading {
  private over = false;
  private readonly onData = this.data.bind(this);
  private readonly onSettled = this.settled.bind(this);
  private readonly onRejected = this.finish.bind(this);
  private readonly onFinished = this.finished.bind(this);

  constructor(
    private readonly body: Readable,
    private readonly onChunk: (chunk: Buffer) => boolean | Promise<boolean>,
    private readonly resolve: () => void,
    private readonly reject: (err: unknown) => void,
  ) {}

  start(): void {
    // The listener `finished` leaves behind keeps a late error from going unhandled.
    finished(this.body, this.onFinished);
    this.body.on('data', this.onData);
  }

  /** `finished`'s callback: null or undefined when the body ended well. */
  private finished(err?: Error | null): void {
    this.finish(err ?? undefined);
  }

  private finish(err?: unknown): void {
    if (this.over) return;
    this.over = true;
    this.body.off('data', this.onData);
    this.body.pause();
    if (err === undefined) this.resolve();
    else this.reject(err);
  }

  private data(chunk: Buffer): void {
    let next: boolean | Promise<boolean>;
    try {
      next = this.onChunk(chunk);
    } catch (err) {
      this.finish(err);
      return;
    }
    if (next === false) return;
    if (next === true) {
      this.finish();
      return;
    }
    this.body.pause();
    next.then(this.onSettled, this.onRejected);
  }

  /** What `onChunk`'s promise answered: stop, or read on. */
  private settled(stop: boolean): void {
    if (stop) this.finish();
    else if (!this.over) this.body.resume();
  }
}

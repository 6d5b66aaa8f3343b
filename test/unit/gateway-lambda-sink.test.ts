/** The response sink over a Lambda response stream: no promise per accepted chunk, backpressure and failures kept. */
import { Writable } from 'node:stream';
import { lambdaSink, type AwsLambdaRuntime } from '../../lambdas/gateway/wiring';

/** A runtime whose `HttpResponseStream.from` hands the stream back, recording the prelude. */
function runtime(preludes: unknown[]): AwsLambdaRuntime {
  return {
    streamifyResponse: (handler) => handler,
    HttpResponseStream: {
      from(stream, metadata) {
        preludes.push(metadata);
        return stream;
      },
    },
  };
}

/** A response stream whose writes complete only when `release` is called (or at once when `instant`). */
function stream(options: { highWaterMark: number; instant: boolean }): { out: Writable; written: string[]; release: (err?: Error) => void } {
  const written: string[] = [];
  const pending: ((err?: Error | null) => void)[] = [];
  const out = new Writable({
    highWaterMark: options.highWaterMark,
    write(chunk: Buffer, _enc, callback) {
      written.push(chunk.toString());
      if (options.instant) callback();
      else pending.push(callback);
    },
  });
  out.on('error', () => undefined);
  return { out, written, release: (err) => pending.shift()?.(err ?? null) };
}

describe('lambdaSink', () => {
  test('status and headers go in the prelude; a write before start is refused', async () => {
    const preludes: unknown[] = [];
    const { out } = stream({ highWaterMark: 1024, instant: true });
    const sink = lambdaSink(runtime(preludes), out);
    await expect(sink.write(Buffer.from('x'))).rejects.toThrow('write before start');
    sink.start(200, { 'content-type': 'text/event-stream' });
    expect(sink.started).toBe(true);
    expect(preludes).toEqual([{ statusCode: 200, headers: { 'content-type': 'text/event-stream' } }]);
  });

  test('a chunk the stream takes at once returns nothing to wait for, and arrives in order', async () => {
    const { out, written } = stream({ highWaterMark: 1024, instant: true });
    const sink = lambdaSink(runtime([]), out);
    sink.start(200, {});
    expect(sink.write(Buffer.from('a'))).toBeUndefined();
    expect(sink.write(Buffer.from('b'))).toBeUndefined();
    await sink.end();
    expect(written).toEqual(['a', 'b']);
  });

  test('when the stream is full, the write waits for drain', async () => {
    const { out, written, release } = stream({ highWaterMark: 4, instant: false });
    const sink = lambdaSink(runtime([]), out);
    sink.start(200, {});
    const wait = sink.write(Buffer.from('12345'));
    expect(wait).toBeInstanceOf(Promise);
    let drained = false;
    void wait?.then(() => {
      drained = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(false);
    release();
    await wait;
    expect(drained).toBe(true);
    expect(written).toEqual(['12345']);
  });

  test('a stream error fails the write waiting for drain, and every write after it', async () => {
    const { out, release } = stream({ highWaterMark: 4, instant: false });
    const sink = lambdaSink(runtime([]), out);
    sink.start(200, {});
    const wait = sink.write(Buffer.from('12345'));
    release(new Error('runtime gone'));
    await expect(wait).rejects.toThrow('runtime gone');
    await expect(sink.write(Buffer.from('more'))).rejects.toThrow('runtime gone');
  });

  test('an error on a chunk already taken fails the next write', async () => {
    const { out, release } = stream({ highWaterMark: 1024, instant: false });
    const sink = lambdaSink(runtime([]), out);
    sink.start(200, {});
    expect(sink.write(Buffer.from('a'))).toBeUndefined();
    release(new Error('runtime gone'));
    await new Promise((r) => setImmediate(r));
    await expect(sink.write(Buffer.from('b'))).rejects.toThrow('runtime gone');
  });
});

/** Reading a provider's body chunk by chunk without `for await`, with its stops, pauses and failures. */
import { PassThrough } from 'node:stream';
import { setImmediate as turn } from 'node:timers/promises';
import { eachChunk } from '../../lambdas/gateway/each-chunk';

const text = (chunks: readonly Buffer[]): string[] => chunks.map((c) => c.toString());

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: Error) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('eachChunk', () => {
  test('hands every chunk over in order, and resolves once the body ended', async () => {
    const body = new PassThrough();
    const seen: Buffer[] = [];
    const reading = eachChunk(body, (c) => {
      seen.push(c);
      return false;
    });
    for (const piece of ['a', 'b', 'c']) {
      body.write(piece);
      await turn();
    }
    body.end();
    await reading;
    expect(text(seen)).toEqual(['a', 'b', 'c']);
  });

  test('a promise pauses the body until it settles: nothing is handed over meanwhile, the end included', async () => {
    const body = new PassThrough();
    const seen: Buffer[] = [];
    const wait = deferred<boolean>();
    let ended = false;
    const reading = eachChunk(body, (c) => {
      seen.push(c);
      return c.toString() === 'slow' ? wait.promise : false;
    }).then(() => {
      ended = true;
    });
    body.write('slow');
    await turn();
    body.write('next');
    body.end();
    for (let i = 0; i < 5; i += 1) await turn();
    expect(text(seen)).toEqual(['slow']);
    expect(ended).toBe(false);
    wait.resolve(false);
    await reading;
    expect(text(seen)).toEqual(['slow', 'next']);
  });

  test.each([
    ['true', (): boolean | Promise<boolean> => true],
    ['a promise of true', (): boolean | Promise<boolean> => Promise.resolve(true)],
  ])('%s stops reading: resolved, nothing more handed over, the rest left unread', async (_label, stop) => {
    const body = new PassThrough();
    const seen: Buffer[] = [];
    const reading = eachChunk(body, (c) => {
      seen.push(c);
      return c.toString() === 'stop' ? stop() : false;
    });
    body.write('go');
    await turn();
    body.write('stop');
    await reading;
    body.write('after');
    await turn();
    expect(text(seen)).toEqual(['go', 'stop']);
    expect(body.readableLength).toBe('after'.length);
  });

  test('a body that fails rejects with its error', async () => {
    const body = new PassThrough();
    const reading = eachChunk(body, () => false);
    body.write('a');
    await turn();
    body.destroy(new Error('reset'));
    await expect(reading).rejects.toThrow('reset');
  });

  test('a body closed before its end rejects, as `for await` does', async () => {
    const body = new PassThrough();
    const reading = eachChunk(body, () => false);
    body.write('a');
    await turn();
    body.destroy();
    await expect(reading).rejects.toMatchObject({ code: 'ERR_STREAM_PREMATURE_CLOSE' });
  });

  test('onChunk throwing, or its promise rejecting, rejects with that error', async () => {
    const thrower = new PassThrough();
    const threw = eachChunk(thrower, () => {
      throw new Error('bug');
    });
    thrower.write('a');
    await expect(threw).rejects.toThrow('bug');

    const rejecter = new PassThrough();
    const rejected = eachChunk(rejecter, () => Promise.reject(new Error('ledger down')));
    rejecter.write('a');
    await expect(rejected).rejects.toThrow('ledger down');
  });

  test('an error after reading stopped is not left unhandled', async () => {
    const body = new PassThrough();
    const reading = eachChunk(body, () => true);
    body.write('a');
    await reading;
    body.destroy(new Error('late'));
    await turn();
    await turn();
    expect(body.destroyed).toBe(true);
  });
});

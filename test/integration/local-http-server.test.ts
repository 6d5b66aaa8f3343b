import { type ClientRequest, type IncomingMessage, request } from 'node:http';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { type LambdaServer, type StreamingHandler, serveLambda } from '../../local/http-server';
import { installLambdaShim, isStreamingHandler } from '../../local/lambda-shim';

const lambda = installLambdaShim();

interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
}
function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Collects a response body. */
async function readAll(res: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function waitResponse(req: ClientRequest): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    req.once('response', resolve);
    req.once('error', reject);
  });
}

const servers: LambdaServer[] = [];
async function serve(handler: StreamingHandler, maxBodyBytes?: number): Promise<LambdaServer> {
  const server = await serveLambda({ handler, maxBodyBytes, log: () => undefined });
  servers.push(server);
  return server;
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe('streamifyResponse shim', () => {
  it('marks the handler as the runtime does and returns it unchanged', () => {
    const fn = async (): Promise<void> => undefined;
    expect(isStreamingHandler(fn)).toBe(false);
    expect(lambda.streamifyResponse(fn)).toBe(fn);
    expect(isStreamingHandler(fn)).toBe(true);
    expect(installLambdaShim()).toBe(lambda);
  });
});

describe('serveLambda streaming', () => {
  it('sends status and headers on the first write, then each chunk as it is written', async () => {
    const log: string[] = [];
    const seen = [deferred(), deferred(), deferred()];
    const server = await serve(
      lambda.streamifyResponse(async (_event, stream) => {
        const out = lambda.HttpResponseStream.from(stream, {
          statusCode: 201,
          headers: { 'content-type': 'text/event-stream', 'x-test': 'yes' },
        });
        for (let i = 0; i < 3; i += 1) {
          log.push(`write ${i}`);
          out.write(`chunk-${i}\n`);
          // The next chunk is written only once the client holds this one: a server that held
          // chunks back would never get here.
          await seen[i]?.promise;
        }
        out.end();
      }),
    );
    const req = request(`${server.url}/v1/stream`);
    req.end();
    const res = await waitResponse(req);
    log.push(`response ${res.statusCode} ${res.headers['content-type']} ${res.headers['x-test']}`);
    let index = 0;
    res.on('data', (chunk: Buffer) => {
      log.push(`data ${chunk.toString().trim()}`);
      seen[index]?.resolve();
      index += 1;
    });
    await new Promise((resolve) => res.on('end', resolve));
    expect(log).toEqual([
      'write 0',
      'response 201 text/event-stream yes',
      'data chunk-0',
      'write 1',
      'data chunk-1',
      'write 2',
      'data chunk-2',
    ]);
  });

  it('sends nothing before the first write', async () => {
    const prepared = deferred();
    const release = deferred();
    const server = await serve(
      lambda.streamifyResponse(async (_event, stream) => {
        const out = lambda.HttpResponseStream.from(stream, { statusCode: 202, headers: { 'x-late': '1' } });
        prepared.resolve();
        await release.promise;
        out.write('x');
        out.end();
      }),
    );
    const req = request(`${server.url}/`);
    req.end();
    let responded = false;
    const response = waitResponse(req).then((res) => {
      responded = true;
      return res;
    });
    await prepared.promise;
    // Loopback delivers within a few milliseconds; a head sent by from() would be here by now.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(responded).toBe(false);
    release.resolve();
    const res = await response;
    expect(res.statusCode).toBe(202);
    expect(res.headers['x-late']).toBe('1');
    expect((await readAll(res)).toString()).toBe('x');
  });

  it('builds a Function URL payload 2.0 event', async () => {
    let seen: APIGatewayProxyEventV2 | undefined;
    const server = await serve(
      lambda.streamifyResponse(async (event, stream) => {
        seen = event;
        stream.write('ok');
        stream.end();
      }),
    );
    const body = Buffer.from('{"model":"héllo"}');
    const req = request(`${server.url}/v1/chat/completions?a=1&a=2&b=x%20y`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'X-Custom': 'Value',
        Cookie: 'c1=1; c2=2',
        'User-Agent': 'sluice-test/1',
        'Content-Length': body.length,
      },
    });
    req.end(body);
    const res = await waitResponse(req);
    expect(res.headers['content-type']).toBe('application/octet-stream'); // the runtime's default
    await readAll(res);
    expect(seen).toMatchObject({
      version: '2.0',
      routeKey: '$default',
      rawPath: '/v1/chat/completions',
      rawQueryString: 'a=1&a=2&b=x%20y',
      queryStringParameters: { a: '1,2', b: 'x y' },
      cookies: ['c1=1', 'c2=2'],
      isBase64Encoded: true,
      requestContext: {
        routeKey: '$default',
        stage: '$default',
        http: {
          method: 'POST',
          path: '/v1/chat/completions',
          protocol: 'HTTP/1.1',
          sourceIp: '127.0.0.1',
          userAgent: 'sluice-test/1',
        },
      },
    });
    expect(seen?.headers).toMatchObject({
      'content-type': 'application/json',
      'x-custom': 'Value',
      'content-length': String(body.length),
    });
    expect(seen?.headers.cookie).toBeUndefined();
    expect(Buffer.from(seen?.body ?? '', 'base64').equals(body)).toBe(true);
    expect(seen?.requestContext.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(Math.abs((seen?.requestContext.timeEpoch ?? 0) - Date.now())).toBeLessThan(60_000);
  });

  it('answers 502 when the handler throws before writing, and cuts the stream after', async () => {
    const before = await serve(
      lambda.streamifyResponse(async () => {
        throw new Error('boom');
      }),
    );
    const req1 = request(`${before.url}/`);
    req1.end();
    const res1 = await waitResponse(req1);
    expect(res1.statusCode).toBe(502);
    await readAll(res1);

    const after = await serve(
      lambda.streamifyResponse(async (_event, stream) => {
        stream.write('partial');
        await new Promise((resolve) => setTimeout(resolve, 20));
        throw new Error('late boom');
      }),
    );
    const req2 = request(`${after.url}/`);
    req2.end();
    const res2 = await waitResponse(req2);
    expect(res2.statusCode).toBe(200);
    const outcome = await new Promise<string>((resolve) => {
      res2.on('data', () => undefined);
      res2.on('end', () => resolve('ended cleanly'));
      res2.on('aborted', () => resolve('cut'));
      res2.on('error', () => resolve('cut'));
    });
    expect(outcome).toBe('cut');
  });

  it('loses the prelude, as the runtime does, when end(chunk) comes without a write', async () => {
    const server = await serve(
      lambda.streamifyResponse(async (_event, stream) => {
        lambda.HttpResponseStream.from(stream, { statusCode: 404, headers: { 'x-foo': 'bar' } }).end('Not Found');
      }),
    );
    const req = request(`${server.url}/`);
    req.end();
    const res = await waitResponse(req);
    expect(res.statusCode).toBe(502);
    expect(res.headers['x-foo']).toBeUndefined();
    await readAll(res);
  });
});

describe('serveLambda request bodies', () => {
  const limit = 1024;
  /** Answers 413 from the declared length or the body size, like the gateway. */
  function sizeCheckingHandler(seen: APIGatewayProxyEventV2[]): StreamingHandler {
    return lambda.streamifyResponse(async (event, stream) => {
      seen.push(event);
      const declared = Number(event.headers['content-length'] ?? '0');
      const size = event.body === undefined ? 0 : Buffer.from(event.body, 'base64').length;
      const tooLarge = declared > limit || size > limit;
      const out = lambda.HttpResponseStream.from(stream, {
        statusCode: tooLarge ? 413 : 200,
        headers: { 'content-type': 'application/json' },
      });
      out.write(JSON.stringify({ size }));
      out.end();
    });
  }

  it('refuses a declared length over the limit without reading the body', async () => {
    const seen: APIGatewayProxyEventV2[] = [];
    const server = await serve(sizeCheckingHandler(seen), limit);
    const req = request(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(10 * 1024 * 1024) },
    });
    req.on('error', () => undefined);
    // Headers only: the upload is never sent, so a server waiting for it would never answer.
    req.flushHeaders();
    const res = await waitResponse(req);
    expect(res.statusCode).toBe(413);
    expect(res.headers.connection).toBe('close');
    expect(JSON.parse((await readAll(res)).toString())).toEqual({ size: 0 });
    expect(seen).toHaveLength(1);
    expect(seen[0]?.body).toBeUndefined();
    expect(seen[0]?.isBase64Encoded).toBe(false);
    expect(seen[0]?.headers['content-length']).toBe(String(10 * 1024 * 1024));
    // The server closes the connection rather than wait for (or drain) the upload.
    await new Promise((resolve) => (req.socket?.destroyed ? resolve(undefined) : req.socket?.once('close', resolve)));
    req.destroy();
  });

  it('does not invite an oversized upload with 100 Continue, but does invite one within the limit', async () => {
    const seen: APIGatewayProxyEventV2[] = [];
    const server = await serve(sizeCheckingHandler(seen), limit);

    const big = request(`${server.url}/`, {
      method: 'POST',
      headers: { expect: '100-continue', 'content-length': String(limit + 1) },
    });
    big.on('error', () => undefined);
    let invited = false;
    big.on('continue', () => {
      invited = true;
    });
    big.flushHeaders();
    const bigRes = await waitResponse(big);
    expect(bigRes.statusCode).toBe(413);
    await readAll(bigRes);
    expect(invited).toBe(false); // a 100 would have arrived before the final response
    big.destroy();

    const small = request(`${server.url}/`, {
      method: 'POST',
      headers: { expect: '100-continue', 'content-length': '5' },
    });
    small.on('continue', () => small.end('hello'));
    small.flushHeaders();
    const smallRes = await waitResponse(small);
    expect(smallRes.statusCode).toBe(200);
    expect(JSON.parse((await readAll(smallRes)).toString())).toEqual({ size: 5 });
  });

  it('reads an undeclared (chunked) body only to the limit plus one byte', async () => {
    const seen: APIGatewayProxyEventV2[] = [];
    const server = await serve(sizeCheckingHandler(seen), limit);
    const req = request(`${server.url}/v1/chat/completions`, { method: 'POST' }); // chunked: no length
    let uploadError: Error | undefined;
    req.on('error', (err) => {
      uploadError = err;
    });
    const response = waitResponse(req);

    // Keep uploading a recognisable pattern until the server stops taking it (it must not drain
    // 64 MiB) or the cap is reached.
    const cap = 64 * 1024 * 1024;
    const piece = Buffer.alloc(16 * 1024, 0);
    for (let i = 0; i < piece.length; i += 1) piece[i] = i % 251;
    let accepted = 0;
    const uploading = (async () => {
      while (accepted < cap && uploadError === undefined && !req.destroyed) {
        const ok = await new Promise<boolean>((resolve) => {
          // The server ends the connection gently after its answer; the client then destroys the
          // request without calling back a write still pending, so its close ends the upload too.
          const closed = (): void => resolve(false);
          req.once('close', closed);
          req.write(piece, (err) => {
            req.off('close', closed);
            resolve(err === undefined || err === null);
          });
        });
        if (!ok) break;
        accepted += piece.length;
      }
    })();

    const res = await response;
    expect(res.statusCode).toBe(413);
    expect(JSON.parse((await readAll(res)).toString())).toEqual({ size: limit + 1 });
    await uploading;
    expect(accepted).toBeLessThan(cap);
    expect(seen).toHaveLength(1);
    const got = Buffer.from(seen[0]?.body ?? '', 'base64');
    expect(got.length).toBe(limit + 1);
    expect(got.equals(piece.subarray(0, limit + 1))).toBe(true);
    req.destroy();
  });
});

describe('serveLambda after the client disconnects', () => {
  it('keeps accepting writes, gives the handler no close event, and lets it complete', async () => {
    const clientGone = deferred();
    const handlerDone = deferred<{ events: string[]; wrote: number }>();
    const server = await serve(
      lambda.streamifyResponse(async (_event, stream) => {
        const events: string[] = [];
        stream.on('close', () => events.push('close'));
        stream.on('error', (err) => events.push(`error ${err.message}`));
        const out = lambda.HttpResponseStream.from(stream, { statusCode: 200, headers: { 'content-type': 'text/plain' } });
        out.write('first');
        await clientGone.promise;
        // Far more than the socket buffers hold: these writes meet the closed connection.
        const piece = Buffer.alloc(64 * 1024, 0x61);
        let wrote = 0;
        for (let i = 0; i < 64; i += 1) {
          await new Promise<void>((resolve, reject) => out.write(piece, (err) => (err ? reject(err) : resolve())));
          wrote += piece.length;
        }
        events.push('before end');
        await new Promise<void>((resolve) => out.end(resolve));
        handlerDone.resolve({ events, wrote });
      }),
    );
    const req = request(`${server.url}/`);
    req.on('error', () => undefined);
    req.end();
    const res = await waitResponse(req);
    await new Promise((resolve) => res.once('data', resolve));
    const socket = req.socket;
    req.destroy();
    await new Promise((resolve) => (socket?.destroyed ? resolve(undefined) : socket?.once('close', resolve)));
    clientGone.resolve();

    const { events, wrote } = await handlerDone.promise;
    expect(wrote).toBe(64 * 64 * 1024);
    // 'close' only after the handler's own end(), never because the client left.
    expect(events[0]).toBe('before end');
    expect(events.filter((e) => e !== 'close')).toEqual(['before end']);
  });

  it('close() waits for running invocations before returning', async () => {
    const started = deferred();
    const release = deferred();
    const order: string[] = [];
    const server = await serveLambda({
      log: () => undefined,
      handler: lambda.streamifyResponse(async (_event, stream) => {
        started.resolve();
        stream.write('x');
        await release.promise;
        order.push('handler finished');
        stream.end();
      }),
    });
    const req = request(`${server.url}/`);
    req.on('error', () => undefined);
    req.end();
    await started.promise;
    const closing = server.close().then(() => order.push('closed'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    order.push('releasing');
    release.resolve();
    await closing;
    expect(order).toEqual(['releasing', 'handler finished', 'closed']);
  });
});

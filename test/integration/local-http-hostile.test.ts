/**
 * The local HTTP layer against a hostile client (issue 14, items 1 and 2): every answer, including
 * what Node's parser refuses before a handler could run, is SPEC's envelope with both request-id
 * headers; complete requests on a connection are answered, in order, before what follows them is
 * refused; and a refused oversize upload gets its 413 before the connection closes, even from a
 * client that keeps writing.
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { type LambdaServer, type StreamingHandler, serveLambda } from '../../local/http-server';
import { installLambdaShim } from '../../local/lambda-shim';
import { exchange, type RawResponse } from '../support/raw-http';

const lambda = installLambdaShim();
const LIMIT = 64 * 1024;

/** Answers 200 with the method, path and body size it saw; 413 on a declared or read size over the limit. */
const echo: StreamingHandler = lambda.streamifyResponse(async (event: APIGatewayProxyEventV2, stream) => {
  const declared = Number(event.headers['content-length'] ?? '0');
  const size = event.body === undefined ? 0 : Buffer.from(event.body, 'base64').length;
  const tooLarge = declared > LIMIT || size > LIMIT;
  // A little later, so a refusal of what follows on the connection would overtake it if it could.
  await new Promise((r) => setTimeout(r, 30));
  const out = lambda.HttpResponseStream.from(stream, {
    statusCode: tooLarge ? 413 : 200,
    headers: { 'content-type': 'application/json', 'x-sluice-request-id': 'req_handler', 'x-request-id': 'req_handler' },
  });
  out.write(JSON.stringify({ method: event.requestContext.http.method, path: event.rawPath, size }));
  out.end();
}) as StreamingHandler;

let server: LambdaServer;
let port: number;
beforeAll(async () => {
  server = await serveLambda({ handler: echo, maxBodyBytes: LIMIT, log: () => undefined, lingerMs: 2_000 });
  port = server.port;
});
afterAll(async () => server.close());

/** Checks a response is SPEC's envelope with the given status and code, and both id headers agree. */
function expectEnvelope(r: RawResponse | undefined, status: number, code: string | null): Record<string, unknown> {
  expect(r).toBeDefined();
  const res = r as RawResponse;
  expect({ status: res.status, contentType: res.headers['content-type'] }).toEqual({ status, contentType: 'application/json' });
  const id = res.headers['x-sluice-request-id'];
  expect(id).toMatch(/^req_[0-9a-f]{24}$/);
  expect(res.headers['x-request-id']).toBe(id);
  const body = JSON.parse(res.body) as { error: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'request_id', 'type']);
  expect(body.error.code).toBe(code);
  expect(body.error.request_id).toBe(id);
  expect(body.error.param).toBeNull();
  expect(typeof body.error.message).toBe('string');
  return body.error;
}

const post = (headers: string, body = ''): string => `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${headers}\r\n${body}`;

describe('what the parser refuses is answered in the envelope', () => {
  const cases: readonly [string, string, number, string][] = [
    ['Content-Length: abc', post('Content-Length: abc\r\n', '{}'), 400, 'malformed_request'],
    ['a Content-Length of 20 digits', post('Content-Length: 99999999999999999999\r\n', '{}'), 400, 'malformed_request'],
    ['Content-Length with chunked encoding', post('Content-Length: 5\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n'), 400, 'malformed_request'],
    ['a bad chunk size', post('Transfer-Encoding: chunked\r\n', 'zz\r\nabc\r\n'), 400, 'malformed_request'],
    ['two Content-Lengths that disagree', post('Content-Length: 2\r\nContent-Length: 3\r\n', '{}x'), 400, 'malformed_request'],
    ['a request line that is not HTTP', 'HELLO\r\n\r\n', 400, 'malformed_request'],
    ['an Authorization header over 16 KB', post(`Authorization: Bearer ${'a'.repeat(17_000)}\r\nContent-Length: 2\r\n`, '{}'), 431, 'request_headers_too_large'],
  ];
  it.each(cases)('%s', async (_name, raw, status, code) => {
    const got = await exchange(port, raw);
    expect(got.responses).toHaveLength(1);
    expectEnvelope(got.responses[0], status, code);
    expect(got.responses[0]?.headers.connection).toBe('close');
    expect(got.reset).toBe(false);
  });

  it('a method the parser does not know: 405 with Allow on a served path, 404 elsewhere', async () => {
    const served = await exchange(port, 'FROB /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n');
    expectEnvelope(served.responses[0], 405, 'method_not_allowed');
    expect(served.responses[0]?.headers.allow).toBe('POST');
    const models = await exchange(port, 'FROB /v1/models/local/sim-small?x=1 HTTP/1.1\r\nHost: x\r\n\r\n');
    expectEnvelope(models.responses[0], 405, 'method_not_allowed');
    expect(models.responses[0]?.headers.allow).toBe('GET');
    const elsewhere = await exchange(port, 'FROB /v1/embeddings HTTP/1.1\r\nHost: x\r\n\r\n');
    expectEnvelope(elsewhere.responses[0], 404, 'endpoint_not_supported');
  });

  it('a body shorter than its Content-Length, then the client ends: 408 request_incomplete', async () => {
    const got = await exchange(port, post('Content-Length: 100\r\n', '{"a":'), { endAfterWrite: true });
    expect(got.responses).toHaveLength(1);
    expectEnvelope(got.responses[0], 408, 'request_incomplete');
  });
});

describe('a complete request is answered before what follows it is refused', () => {
  it('a Content-Length shorter than the body: the first request is answered, then the rest is refused', async () => {
    const got = await exchange(port, post('Content-Length: 2\r\n', '{}xyz and the rest of what was sent\r\n\r\n'));
    expect(got.responses.map((r) => r.status)).toEqual([200, 400]);
    expect(JSON.parse(got.responses[0]?.body ?? '')).toEqual({ method: 'POST', path: '/v1/chat/completions', size: 2 });
    expectEnvelope(got.responses[1], 400, 'malformed_request');
  });

  it('two pipelined requests, then garbage: both answered in order, then the refusal', async () => {
    const one = post('Content-Length: 2\r\n', '{}');
    const two = 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n';
    const got = await exchange(port, `${one}${two}\u0001\u0002 not http\r\n\r\n`);
    expect(got.responses.map((r) => r.status)).toEqual([200, 200, 400]);
    expect(JSON.parse(got.responses[1]?.body ?? '').path).toBe('/v1/models');
    expectEnvelope(got.responses[2], 400, 'malformed_request');
  });

  it('a well-formed connection is not disturbed: keep-alive requests are all answered', async () => {
    const one = post('Content-Length: 2\r\n', '{}');
    const got = await exchange(port, `${one}${one}${one}`, { endAfterWrite: true });
    expect(got.responses.map((r) => r.status)).toEqual([200, 200, 200]);
  });
});

describe('an oversize upload gets its 413 before the connection closes', () => {
  it('a declared length over the limit from a client that writes its whole body regardless: the 413 arrives, no reset', async () => {
    const filler = Buffer.alloc(16 * 1024, 0x61);
    for (let i = 0; i < 5; i += 1) {
      const declared = LIMIT * 2;
      const got = await exchange(port, post(`Content-Length: ${declared}\r\nContent-Type: application/json\r\n`), { keepWriting: filler, fillerBytes: declared });
      expect(got.responses).toHaveLength(1);
      expect(got.responses[0]?.status).toBe(413);
      expect(got.responses[0]?.headers.connection).toBe('close');
      expect(got.reset).toBe(false);
    }
  });

  it('a client writing far past its declared length: the drain is bounded, so the connection still ends', async () => {
    const filler = Buffer.alloc(64 * 1024, 0x62);
    const started = Date.now();
    const got = await exchange(port, post(`Content-Length: ${LIMIT + 1}\r\n`), { keepWriting: filler, timeoutMs: 15_000 });
    expect(got.responses[0]?.status).toBe(413);
    expect(got.responses[0]?.headers['x-request-id']).toBe('req_handler');
    // Bounded in bytes (4 × the limit here) and time (2 s here): it cannot read forever.
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('an undeclared (chunked) body over the limit from a client that keeps writing: the 413 arrives', async () => {
    const chunk = Buffer.concat([Buffer.from('4000\r\n'), Buffer.alloc(0x4000, 0x63), Buffer.from('\r\n')]);
    const got = await exchange(port, post('Transfer-Encoding: chunked\r\n'), { keepWriting: chunk });
    expect(got.responses[0]?.status).toBe(413);
    expect(JSON.parse(got.responses[0]?.body ?? '').size).toBe(LIMIT + 1);
  });
});

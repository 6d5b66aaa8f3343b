/**
 * The gateway's streaming handler (`streamifyResponse` over `lambdaSink`) without the Lambda runtime: the fallback
 * `awslambda` writes the Function URL's prelude (metadata JSON, eight NUL bytes) and then the
 * body; the invocation ends only once the request is settled; a slow client is honoured.
 */
import { Writable } from 'node:stream';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { streamingHandler } from '../../lambdas/gateway/streaming';
import { memoryGateway, RAW_KEY } from '../support/memory-ports';

function event(body: unknown): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/v1/chat/completions',
    rawQueryString: '',
    headers: { authorization: `Bearer ${RAW_KEY}`, 'content-type': 'application/json' },
    requestContext: { http: { method: 'POST', path: '/v1/chat/completions' } },
    body: JSON.stringify(body),
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2;
}

/** A response stream that keeps what it is given, each write taking `delayMs`. */
function responseStream(delayMs = 0): Writable & { bytes: Buffer[]; contentType?: string; setContentType(t: string): void } {
  const stream = new Writable({
    highWaterMark: 64,
    write(chunk: Buffer, _enc, done) {
      stream.bytes.push(chunk);
      if (delayMs === 0) done();
      else setTimeout(done, delayMs);
    },
  }) as Writable & { bytes: Buffer[]; contentType?: string; setContentType(t: string): void };
  stream.bytes = [];
  stream.setContentType = (t) => {
    stream.contentType = t;
  };
  return stream;
}

const frame = (i: number): string => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: `t${i}` }, finish_reason: null }] })}\n\n`;
const usage = `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 3, completion_tokens: 40, total_tokens: 43 } })}\n\n`;

test.each([
  ['a non-streamed reply', false, 0],
  ['a stream to a slow client', true, 2],
])('%s: prelude, body, and the request settled before the invocation ends', async (_name, stream, delayMs) => {
  const chunks = stream
    ? [...Array.from({ length: 40 }, (_, i) => frame(i)), usage, 'data: [DONE]\n\n']
    : [JSON.stringify({ id: 'c', object: 'chat.completion', model: 'sim-small', choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } })];
  const mg = memoryGateway({ replies: () => ({ status: 200, chunks }) });
  const handler = streamingHandler(mg.gateway);
  const out = responseStream(delayMs);
  await handler(event({ model: 'local/sim-small', messages: [], max_tokens: 100, ...(stream ? { stream: true } : {}) }), out, { awsRequestId: 'r1' } as Context);
  // The invocation is over only once the hold is settled.
  expect(mg.ledger.open.size).toBe(0);
  expect(mg.ledger.settlements).toHaveLength(1);
  expect(mg.ledger.settlements[0]?.settlement.outcome).toBe('ok');
  const all = Buffer.concat(out.bytes);
  const nul = all.indexOf(Buffer.alloc(8));
  expect(out.contentType).toBe('application/vnd.awslambda.http-integration-response');
  const prelude = JSON.parse(all.subarray(0, nul).toString('utf8')) as { statusCode: number; headers: Record<string, string> };
  expect(prelude.statusCode).toBe(200);
  expect(prelude.headers['x-sluice-served-by']).toBe('local/sim-small');
  const body = all.subarray(nul + 8).toString('utf8');
  if (stream) {
    for (let i = 0; i < 40; i += 1) expect(body).toContain(`"t${i}"`);
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
  } else {
    expect(JSON.parse(body)).toMatchObject({ model: 'local/sim-small' });
  }
});

test('a refusal goes out as the error envelope with its status', async () => {
  const mg = memoryGateway();
  const out = responseStream();
  await streamingHandler(mg.gateway)(event({ model: 'bare-id', messages: [] }), out, { awsRequestId: 'r2' } as Context);
  const all = Buffer.concat(out.bytes);
  const nul = all.indexOf(Buffer.alloc(8));
  expect((JSON.parse(all.subarray(0, nul).toString('utf8')) as { statusCode: number }).statusCode).toBe(400);
  expect(JSON.parse(all.subarray(nul + 8).toString('utf8'))).toMatchObject({ error: { code: 'model_id_not_pinned' } });
});

test('the response stream is ended when the invocation returns, and a serve that never answered still gets a 500', async () => {
  const mg = memoryGateway();
  const out = responseStream();
  await streamingHandler(mg.gateway)(event({ model: 'local/sim-small', messages: [], max_tokens: 10 }), out, { awsRequestId: 'r3' } as Context);
  expect(out.writableFinished).toBe(true);

  const silent = { serve: () => Promise.resolve() } as unknown as Parameters<typeof streamingHandler>[0];
  const out2 = responseStream();
  await streamingHandler(silent)(event({}), out2, { awsRequestId: 'r4' } as Context);
  expect(out2.writableFinished).toBe(true);
  const all = Buffer.concat(out2.bytes);
  const nul = all.indexOf(Buffer.alloc(8));
  expect((JSON.parse(all.subarray(0, nul).toString('utf8')) as { statusCode: number }).statusCode).toBe(500);
});

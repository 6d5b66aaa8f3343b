/**
 * The lean DynamoDB client against the SDK it stands in for: the same signature as the SDK's own
 * signer, the same request bodies as the SDK's serializer, the SDK's retry rules, and its errors
 * shaped as the ledger reads them. Its behaviour on real DynamoDB (DynamoDB Local) is in
 * test/integration/dynamo-wire.test.ts and the ledger's integration tests.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, DynamoDBDocumentClient, GetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { SignatureV4 } from '@smithy/signature-v4';
import { NodeSha256 } from '../support/node-sha256';
import { DynamoWire, DynamoWireError, WireSigner, type WireCredentials } from '../../lambdas/adapters/dynamo-wire';

const HOST = 'dynamodb.eu-west-1.amazonaws.com';

describe('WireSigner', () => {
  const cases: { name: string; credentials: WireCredentials; at: Date; region: string; body: string }[] = [
    { name: 'long-term keys', credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' }, at: new Date(Date.UTC(2026, 10, 22, 12, 34, 56)), region: 'eu-west-1', body: '{"TableName":"t","Key":{"pk":{"S":"a"}}}' },
    { name: 'a session token (Lambda role)', credentials: { accessKeyId: 'ASIAEXAMPLE', secretAccessKey: 'secret/with+chars', sessionToken: 'IQoJb3JpZ2luX2VjE'.repeat(20) }, at: new Date(Date.UTC(2027, 0, 1, 0, 0, 0)), region: 'eu-west-1', body: '{"TransactItems":[]}' },
    { name: 'a unicode body', credentials: { accessKeyId: 'AKID', secretAccessKey: 'S' }, at: new Date(Date.UTC(2026, 1, 28, 23, 59, 59, 999)), region: 'eu-west-1', body: '{"Item":{"n":{"S":"héllo ✓ 😀"}}}' },
  ];

  it.each(cases)('signs as the SDK signer does, with $name', async ({ credentials, at, region, body }) => {
    const target = 'DynamoDB_20120810.GetItem';
    const bytes = Buffer.from(body, 'utf8');
    const ours = await new WireSigner(region, HOST).sign(target, bytes, credentials, at);
    const sdk = new SignatureV4({ service: 'dynamodb', region, credentials, sha256: NodeSha256 });
    const headers: Record<string, string> = { 'content-type': 'application/x-amz-json-1.0', host: HOST, 'x-amz-target': target };
    const signed = await sdk.sign(
      { method: 'POST', protocol: 'https:', hostname: HOST, path: '/', query: {}, headers, body },
      { signingDate: at },
    );
    expect(ours.authorization).toBe(signed.headers.authorization);
    expect(ours['x-amz-date']).toBe(signed.headers['x-amz-date']);
    expect(ours['x-amz-security-token']).toBe(signed.headers['x-amz-security-token']);
    expect(ours['x-amz-content-sha256']).toBe(signed.headers['x-amz-content-sha256']);
  });

  it('changes the signature when the body, the time or the secret changes', async () => {
    const signer = new WireSigner('eu-west-1', HOST);
    const creds = { accessKeyId: 'AKID', secretAccessKey: 'S1' };
    const at = new Date(Date.UTC(2026, 10, 22));
    const base = (await signer.sign('T', Buffer.from('{}'), creds, at)).authorization;
    expect((await signer.sign('T', Buffer.from('{ }'), creds, at)).authorization).not.toBe(base);
    expect((await signer.sign('T', Buffer.from('{}'), creds, new Date(at.getTime() + 1000))).authorization).not.toBe(base);
    expect((await signer.sign('T', Buffer.from('{}'), { ...creds, secretAccessKey: 'S2' }, at)).authorization).not.toBe(base);
    // and a day later the cached signing key is not reused
    const nextDay = new Date(at.getTime() + 86_400_000);
    const fresh = (await new WireSigner('eu-west-1', HOST).sign('T', Buffer.from('{}'), creds, nextDay)).authorization;
    expect((await signer.sign('T', Buffer.from('{}'), creds, nextDay)).authorization).toBe(fresh);
  });

  it('matches the signature the hand-written signer it replaced computed (a fixed vector, independent of the SDK)', async () => {
    // Computed by the previous, hand-written SigV4 of this module, which the SDK's signer was
    // tested equal to: the headers DynamoWire chooses to sign must not drift either.
    const signed = await new WireSigner('eu-west-1', HOST).sign(
      'DynamoDB_20120810.GetItem',
      Buffer.from('{"TableName":"t","Key":{"pk":{"S":"a"}}}'),
      { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' },
      new Date(Date.UTC(2026, 10, 22, 12, 34, 56)),
    );
    expect(signed.authorization).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261122/eu-west-1/dynamodb/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-target, Signature=d87a52c8b8f4d0027884747ebab662c3cc289746539e93307b099735a1aaf3d6',
    );
  });
});

/** What the SDK's DocumentClient puts on the wire for a command (its request handler captured). */
async function sdkRequest(command: TransactWriteCommand | UpdateCommand | GetCommand | BatchGetCommand): Promise<{ target: string; body: unknown }> {
  let captured: { headers: Record<string, string>; body: Uint8Array | string } | undefined;
  const client = new DynamoDBClient({
    region: 'eu-west-1',
    endpoint: 'http://127.0.0.1:1',
    credentials: { accessKeyId: 'AKID', secretAccessKey: 'S' },
    requestHandler: {
      handle: (request: { headers: Record<string, string>; body: Uint8Array | string }) => {
        captured = request;
        return Promise.resolve({ response: { statusCode: 200, headers: { 'content-type': 'application/x-amz-json-1.0' }, body: Readable.from([Buffer.from('{}')]) } });
      },
    } as never,
  });
  const doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
  await doc.send(command as never);
  client.destroy();
  if (captured === undefined) throw new Error('the SDK sent nothing');
  const text = typeof captured.body === 'string' ? captured.body : Buffer.from(captured.body.buffer, captured.body.byteOffset, captured.body.byteLength).toString('utf8');
  return { target: captured.headers['x-amz-target'] as string, body: JSON.parse(text) };
}

/** A scripted DynamoDB stand-in for transport behaviour (statuses, resets); replies in order. */
async function scripted(replies: ((req: http.IncomingMessage, res: http.ServerResponse) => void)[]): Promise<{ url: string; seen: { target: string; body: Record<string, unknown> }[]; close(): Promise<void> }> {
  const seen: { target: string; body: Record<string, unknown> }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ target: String(req.headers['x-amz-target']), body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> });
      const reply = replies.shift();
      if (reply === undefined) throw new Error('more requests than scripted');
      reply(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

const json = (status: number, body: unknown) => (_req: http.IncomingMessage, res: http.ServerResponse): void => {
  res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
  res.end(JSON.stringify(body));
};

function wireOn(url: string, options: { attemptTimeoutMs?: number; callBudgetMs?: number; maxAttempts?: number } = {}): DynamoWire {
  return new DynamoWire({ endpoint: url, region: 'local', credentials: () => Promise.resolve({ accessKeyId: 'a', secretAccessKey: 'b' }), ...options });
}

describe('DynamoWire requests', () => {
  const commands = [
    new TransactWriteCommand({
      ClientRequestToken: 'tok-1',
      TransactItems: [
        { Put: { TableName: 'holds', Item: { holdId: 'h1', amountMicros: 12_345, windows: ['A', 'B'], byok: false, memberId: undefined, meta: { a: 1, b: [true, null] } }, ConditionExpression: 'attribute_not_exists(holdId)' } },
        { Update: { TableName: 'ledger', Key: { pk: 'WS#1', sk: 'BALANCE' }, UpdateExpression: 'SET a = a - :n', ConditionExpression: 'a >= :n', ExpressionAttributeValues: { ':n': 7 }, ExpressionAttributeNames: { '#x': 'x' } } },
        { Delete: { TableName: 'holds', Key: { holdId: 'h0' }, ConditionExpression: 'amountMicros = :a', ExpressionAttributeValues: { ':a': 0 } } },
        { ConditionCheck: { TableName: 'ledger', Key: { pk: 'WS#1', sk: 'META' }, ConditionExpression: 'attribute_exists(pk)' } },
      ],
    }),
    new UpdateCommand({ TableName: 'ledger', Key: { pk: 'WS#1', sk: 'R' }, UpdateExpression: 'ADD requests :one', ExpressionAttributeValues: { ':one': 1, ':empty': {} }, ReturnValues: 'ALL_NEW' }),
    new GetCommand({ TableName: 'keys', Key: { keyHash: 'abc' }, ProjectionExpression: 'rateBuckets', ConsistentRead: true }),
    new BatchGetCommand({ RequestItems: { ledger: { Keys: [{ pk: 'WS#1', sk: 'A' }, { pk: 'WS#1', sk: 'B' }], ConsistentRead: true } } }),
  ];

  it.each(commands.map((c) => [c.constructor.name, c] as const))('sends the bytes the SDK would for %s', async (_name, command) => {
    const stub = await scripted([json(200, {})]);
    const wire = wireOn(stub.url);
    try {
      await wire.send(command as never);
      const sdk = await sdkRequest(command);
      expect(stub.seen).toHaveLength(1);
      expect(stub.seen[0]?.target).toBe(sdk.target);
      expect(stub.seen[0]?.body).toEqual(sdk.body);
    } finally {
      wire.destroy();
      await stub.close();
    }
  });

  it('gives every transaction a client request token, and its retries the same one', async () => {
    const stub = await scripted([json(500, { __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: 'x' }), json(200, {}), json(200, {})]);
    const wire = wireOn(stub.url);
    try {
      await wire.send(new TransactWriteCommand({ TransactItems: [{ ConditionCheck: { TableName: 't', Key: { pk: 'a' }, ConditionExpression: 'attribute_exists(pk)' } }] }));
      await wire.send(new TransactWriteCommand({ TransactItems: [{ ConditionCheck: { TableName: 't', Key: { pk: 'a' }, ConditionExpression: 'attribute_exists(pk)' } }] }));
      const tokens = stub.seen.map((s) => s.body.ClientRequestToken);
      expect(tokens[0]).toMatch(/^[0-9a-f-]{36}$/);
      expect(tokens[1]).toBe(tokens[0]);
      expect(tokens[2]).not.toBe(tokens[0]);
      expect(wire.requests).toBe(3);
    } finally {
      wire.destroy();
      await stub.close();
    }
  });
});

describe('DynamoWire retries and errors', () => {
  const get = new GetCommand({ TableName: 't', Key: { pk: 'a' } });

  it('retries throttling and 5xx, then answers', async () => {
    const stub = await scripted([
      json(400, { __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException', message: 'slow down' }),
      json(503, { __type: 'com.amazonaws.dynamodb.v20120810#ServiceUnavailable' }),
      json(200, { Item: { pk: { S: 'a' }, n: { N: '42' } } }),
    ]);
    const wire = wireOn(stub.url);
    try {
      await expect(wire.send(get)).resolves.toMatchObject({ Item: { pk: 'a', n: 42 } });
      expect(stub.seen).toHaveLength(3);
    } finally {
      wire.destroy();
      await stub.close();
    }
  });

  it('gives up after four attempts with the last error', async () => {
    const fail = json(500, { __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: 'boom' });
    const stub = await scripted([fail, fail, fail, fail]);
    const wire = wireOn(stub.url);
    try {
      const err = await wire.send(get).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DynamoWireError);
      expect(err).toMatchObject({ name: 'InternalServerError', message: 'boom', $fault: 'server', $metadata: { httpStatusCode: 500, attempts: 4 } });
      expect(stub.seen).toHaveLength(4);
    } finally {
      wire.destroy();
      await stub.close();
    }
  });

  it('does not retry a client error, and shapes a cancelled transaction as the SDK does', async () => {
    const stub = await scripted([
      json(400, {
        __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
        Message: 'Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]',
        CancellationReasons: [{ Code: 'None' }, { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed', Item: { pk: { S: 'a' }, n: { N: '1' } } }],
      }),
    ]);
    const wire = wireOn(stub.url);
    try {
      const err = await wire.send(new TransactWriteCommand({ TransactItems: [] })).catch((e: unknown) => e);
      expect(err).toMatchObject({
        name: 'TransactionCanceledException',
        $fault: 'client',
        CancellationReasons: [{ Code: 'None' }, { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed', Item: { pk: { S: 'a' }, n: { N: '1' } } }],
      });
      expect((err as Error).message).toMatch(/ConditionalCheckFailed/);
      expect(stub.seen).toHaveLength(1);
    } finally {
      wire.destroy();
      await stub.close();
    }
  });

  it('retries a connection reset by the server', async () => {
    const stub = await scripted([(req) => req.socket.destroy(), json(200, {})]);
    const wire = wireOn(stub.url);
    try {
      await expect(wire.send(get)).resolves.toMatchObject({ Item: undefined });
      expect(stub.seen).toHaveLength(2);
    } finally {
      wire.destroy();
      await stub.close();
    }
  });

  it('a store that never answers fails the call within its budget, whatever the attempts left', async () => {
    const silent = (): undefined => undefined;
    const stub = await scripted([silent, silent, silent, silent, silent, silent]);
    const wire = wireOn(stub.url, { attemptTimeoutMs: 300, callBudgetMs: 700, maxAttempts: 10 });
    const started = Date.now();
    try {
      await expect(wire.send(get)).rejects.toMatchObject({ code: 'ETIMEDOUT' });
      const took = Date.now() - started;
      // Two or three attempts fit in 700 ms; ten would take 3 s.
      expect(took).toBeLessThan(1_500);
      expect(stub.seen.length).toBeGreaterThanOrEqual(2);
      expect(stub.seen.length).toBeLessThanOrEqual(3);
    } finally {
      wire.destroy();
      await stub.close();
    }
  });

  it('a store refusing connections fails the call promptly, after its retries', async () => {
    const stub = await scripted([]);
    const url = stub.url;
    await stub.close();
    const wire = wireOn(url, { callBudgetMs: 5_000 });
    const started = Date.now();
    try {
      await expect(wire.send(get)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      wire.destroy();
    }
  });

  it('refuses a header value with a line break (a session token read from outside) before sending anything', async () => {
    const stub = await scripted([json(200, {})]);
    const wire = new DynamoWire({ endpoint: stub.url, region: 'local', credentials: () => Promise.resolve({ accessKeyId: 'a', secretAccessKey: 'b', sessionToken: 'tok\r\nx-injected: 1' }) });
    try {
      await expect(wire.send(get)).rejects.toBeInstanceOf(TypeError);
      expect(stub.seen).toHaveLength(0);
    } finally {
      wire.destroy();
      await stub.close();
    }
  });

  it('ends an attempt that gets no answer, and tries again', async () => {
    const stub = await scripted([() => undefined, json(200, {})]);
    const wire = wireOn(stub.url, { attemptTimeoutMs: 200 });
    try {
      await expect(wire.send(get)).resolves.toMatchObject({ Item: undefined });
      expect(stub.seen).toHaveLength(2);
    } finally {
      wire.destroy();
      await stub.close();
    }
  });
});

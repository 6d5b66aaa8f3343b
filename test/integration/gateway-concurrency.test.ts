/**
 * Lambda Managed Instances run many invocations at once in one Node.js worker: one event loop, one
 * copy of the handler's module state (AWS: "Each concurrent request handled by the same worker
 * thread shares the same handler object and global state"). This runs the deployed handler
 * (`lambdas/gateway/handler.ts`, the runtime's `streamifyResponse`, its adapters built at module scope from the
 * environment) through the Lambda streaming shim, with 67 invocations in this one process (65 of
 * them in flight at once) against DynamoDB Local and the upstream simulator, and shows that nothing
 * of one request reaches another:
 *
 * - request id and trace id: each response, usage row and EMF line carries its own;
 * - key: 32 keys of 8 workspaces, two requests on each at once (the directory cache's shared
 *   loads), and two unknown keys that must be refused, not served as someone else's;
 * - hold and settlement: each request's own hold (sized from its own body), charged on its own
 *   counts; every hold settled; each workspace's ledger keeps credited = available + held + spent
 *   with spent the sum of its own rows;
 * - telemetry: one EMF request line per request with its own figures (key, workspace, status,
 *   charge, provider call);
 * - abort: one request is cut by its balance running out (its own AbortController ends its
 *   provider call) while the 64 others are held mid-stream by slow clients; all 64 then finish whole;
 * - an invocation whose Lambda context says its time is up still completes: the gateway owns its
 *   deadline (no wrapper of the handler ends an invocation early: middy's early timeout, which
 *   aborted one AbortController shared by every invocation of the process, went with middy).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { addCredit, createKey, createWorkspace, importCatalog, loadCatalogFiles, type AdminContext } from '../../local/ops';
import { installLambdaShim, makeLambdaContext, RuntimeResponseStream, streamingHighWaterMark, type StreamDestination } from '../../local/lambda-shim';
import { startSimulator, type Simulator } from '../../local/simulator';
import { chargeMicros, promptBound, sizeHold } from '../../lambdas/core/pricing';
import type { StreamingLambdaHandler } from '../../lambdas/gateway/streaming';
import type { UsageRecord } from '../../lambdas/shared/records';
import { tableName } from '../../lambdas/shared/schema';
import { readBalance, usageRows } from '../../lambdas/store/balance';
import { testTables, type TestTables } from '../support/dynamo';

jest.setTimeout(180_000);

const WORKSPACES = 8;
const KEYS_PER_WORKSPACE = 4;
const REQUESTS_PER_KEY = 2;
/** Streams started, and released, at once. */
const WAVE = 8;
/** Each reply is long enough (about 150 KB) to fill the buffers between the gateway and a client that stops reading. */
const BASE_MAX_TOKENS = 1000;

let tables: TestTables;
let sim: Simulator;
let secretsDir: string;
let handler: StreamingLambdaHandler;
const savedEnv = { ...process.env };
/** Every invocation made, so that a failing test still lets them finish (their deadline is 540 s). */
const invocations: Invocation[] = [];

interface Seeded {
  readonly workspaceId: string;
  readonly keys: { readonly keyId: string; readonly rawKey: string }[];
}

/** One invocation as the runtime makes it: an event, a response stream, a context of its own. */
interface Invocation {
  readonly awsRequestId: string;
  readonly chunks: Buffer[];
  /** While true, the client reads nothing: the runtime's write callbacks wait (backpressure). */
  held: boolean;
  readonly waiting: (() => void)[];
  ended: boolean;
  readonly firstBytes: Promise<void>;
  readonly finished: Promise<void>;
}

function event(rawKey: string, body: unknown): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: '/v1/chat/completions',
    rawQueryString: '',
    headers: { authorization: `Bearer ${rawKey}`, 'content-type': 'application/json' },
    requestContext: { http: { method: 'POST', path: '/v1/chat/completions', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'test' } },
    body: JSON.stringify(body),
    isBase64Encoded: false,
  } as unknown as APIGatewayProxyEventV2;
}

function invoke(awsRequestId: string, ev: APIGatewayProxyEventV2, options: { held?: boolean; timeoutMs?: number } = {}): Invocation {
  let firstBytes: () => void = () => undefined;
  const inv: Invocation = {
    awsRequestId,
    chunks: [],
    held: options.held ?? false,
    waiting: [],
    ended: false,
    firstBytes: new Promise<void>((resolve) => {
      firstBytes = resolve;
    }),
    finished: Promise.resolve(),
  };
  const destination: StreamDestination = {
    write(_contentType, chunk, done) {
      inv.chunks.push(chunk);
      firstBytes();
      if (inv.held) inv.waiting.push(done);
      else done();
    },
    end(_contentType, done) {
      inv.ended = true;
      done();
    },
  };
  const stream = new RuntimeResponseStream(destination, streamingHighWaterMark(handler));
  const context = makeLambdaContext({ functionName: 'sluice-test-gateway', awsRequestId, timeoutMs: options.timeoutMs ?? 600_000 });
  const made = Object.assign(inv, { finished: handler(ev, stream, context) });
  invocations.push(made);
  return made;
}

function release(inv: Invocation): void {
  inv.held = false;
  for (const done of inv.waiting.splice(0)) done();
}

/** The Function URL's view of a response: the prelude (status, headers), then the body. */
function parsed(inv: Invocation): { status: number; headers: Record<string, string>; body: string } {
  const all = Buffer.concat(inv.chunks);
  const nul = all.indexOf(Buffer.alloc(8));
  if (nul < 0) throw new Error(`${inv.awsRequestId}: no prelude`);
  const prelude = JSON.parse(all.subarray(0, nul).toString('utf8')) as { statusCode: number; headers: Record<string, string> };
  return { status: prelude.statusCode, headers: prelude.headers, body: all.subarray(nul + 8).toString('utf8') };
}

/**
 * A response's request id while its client is still not reading: the runtime writes the prelude's
 * JSON as the stream's first write, which is all that has been let through.
 */
function requestIdSoFar(inv: Invocation): string {
  const first = inv.chunks[0];
  if (first === undefined) throw new Error(`${inv.awsRequestId}: nothing written`);
  const prelude = JSON.parse(first.toString('utf8')) as { headers: Record<string, string> };
  return prelude.headers['x-sluice-request-id'] as string;
}

function usageOf(body: string): { prompt_tokens: number; completion_tokens: number; charge_micros: number } {
  const line = body.split('\n').find((l) => l.startsWith(':x-sluice-usage '));
  if (line === undefined) throw new Error('no usage comment');
  return JSON.parse(line.slice(':x-sluice-usage '.length)) as { prompt_tokens: number; completion_tokens: number; charge_micros: number };
}

/** The ids of the open holds: requests' rows still open. */
async function openHolds(): Promise<Set<string>> {
  // A hold is its request's row while it is open (the usage table, `state` open).
  const out = await tables.doc.send(new ScanCommand({ TableName: tableName(tables.prefix, 'usage'), ConsistentRead: true }));
  return new Set((out.Items ?? []).filter((r) => r.state === 'open').map((r) => String(r.requestId)));
}

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

beforeAll(async () => {
  tables = await testTables();
  sim = await startSimulator();
  secretsDir = mkdtempSync(path.join(tmpdir(), 'sluice-concurrency-'));
  await importCatalog({ doc: tables.doc, tablePrefix: tables.prefix, stage: 'local' }, {});
  // A deployed stage's configuration, with the store and the provider local: EMF telemetry (the
  // stage is not `local`), the deployed caches and store client limits.
  Object.assign(process.env, {
    SLUICE_STAGE: 'test',
    SLUICE_TABLE_PREFIX: tables.prefix,
    SLUICE_DYNAMODB_ENDPOINT: tables.endpoint,
    SLUICE_SECRET_SOURCE: 'env',
    SLUICE_LOCAL_UPSTREAM_URL: sim.url,
    SLUICE_LOCAL_SECRETS_FILE: path.join(secretsDir, 'secrets.json'),
  });
  // As the runtime does: `awslambda` exists before the handler module wraps itself at load.
  installLambdaShim();
  handler = ((await import('../../lambdas/gateway/handler')) as { handler: StreamingLambdaHandler }).handler;
});

afterAll(async () => {
  for (const inv of invocations) release(inv);
  await Promise.all(invocations.map((inv) => inv.finished.catch(() => undefined)));
  process.env = savedEnv;
  await sim?.close();
  tables?.client.destroy();
  if (secretsDir !== undefined) rmSync(secretsDir, { recursive: true, force: true });
});

it('serves 67 concurrent invocations in one process with no request state crossing between them', async () => {
  const admin: AdminContext = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'local' };
  const seeded: Seeded[] = [];
  for (let w = 0; w < WORKSPACES; w += 1) {
    const ws = await createWorkspace(admin, { name: `concurrent ${w}` });
    await addCredit(admin, { workspaceId: ws.workspaceId, minor: 100_000 });
    const keys = [];
    for (let k = 0; k < KEYS_PER_WORKSPACE; k += 1) keys.push(await createKey(admin, { workspaceId: ws.workspaceId }));
    seeded.push({ workspaceId: ws.workspaceId, keys: keys.map((key) => ({ keyId: key.keyId, rawKey: key.rawKey })) });
  }
  const poorWs = await createWorkspace(admin, { name: 'poor' });
  await addCredit(admin, { workspaceId: poorWs.workspaceId, minor: 1 });
  const poorKey = await createKey(admin, { workspaceId: poorWs.workspaceId });

  // Every sim-small reply runs to the request's own max_tokens; the poor workspace's one sim-large
  // request gets a reply far past what its credit can hold.
  sim.setDefault('sim-small', { kind: 'ok', completionTokens: 100_000 });
  sim.script('sim-large', [{ kind: 'ok', completionTokens: 3000, ignoreCeiling: true }]);

  const stdout: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  const spy = jest.spyOn(process.stdout, 'write').mockImplementation(((chunk: string | Uint8Array, ...rest: unknown[]) => {
    stdout.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stdout.write);

  interface Sent {
    readonly inv: Invocation;
    readonly workspaceId: string;
    readonly keyId: string;
    readonly rawKey: string;
    readonly body: { model: string; messages: { role: string; content: string }[]; max_tokens: number; stream: boolean };
  }
  const sent: Sent[] = [];
  try {
    // 64 streams, each its own prompt length and max_tokens, two at once on every key; their
    // clients stop reading, so every one is held part way through its reply. They start in waves of
    // eight (DynamoDB Local runs one transaction at a time, so 64 admissions at once would wait out
    // the store client's budget on a busy machine); every one stays in flight to the end.
    const bodies: Omit<Sent, 'inv'>[] = [];
    for (const ws of seeded) {
      for (const key of ws.keys) {
        for (let r = 0; r < REQUESTS_PER_KEY; r += 1) {
          const n = bodies.length;
          bodies.push({
            workspaceId: ws.workspaceId,
            keyId: key.keyId,
            rawKey: key.rawKey,
            body: {
              model: 'local/sim-small',
              messages: [{ role: 'user', content: Array.from({ length: n + 1 }, (_, i) => `w${n}x${i}`).join(' ') }],
              max_tokens: BASE_MAX_TOKENS + n,
              stream: true,
            },
          });
        }
      }
    }
    // Two keys nobody issued, in flight beside the first wave.
    const strangers = [0, 1].map((i) => invoke(`aws-stranger-${i}`, event(`slc_dev_${String(i).repeat(43)}`, { model: 'local/sim-small', messages: [], max_tokens: 5 })));
    for (let start = 0; start < bodies.length; start += WAVE) {
      const wave = bodies.slice(start, start + WAVE).map((b, i) => {
        const n = start + i;
        // One invocation whose Lambda context has no time left: the gateway's deadline is its own.
        const inv = invoke(`aws-${n}`, event(b.rawKey, b.body), { held: true, ...(n === 7 ? { timeoutMs: 1 } : {}) });
        return { ...b, inv };
      });
      sent.push(...wave);
      await Promise.all(wave.map((s) => s.inv.firstBytes));
      // Held: the stream has begun, and cannot finish while its client is not reading.
      await until('a wave of streams to fill their buffers', () => wave.every((s) => s.inv.waiting.length > 0));
    }
    const admitted = await openHolds();
    expect(admitted.size).toBe(sent.length);

    // The poor workspace's stream outgrows its hold and its balance: its own controller cuts its
    // provider call, while the 64 others wait mid-stream in the same process.
    const poorBody = { model: 'local/sim-large', messages: [{ role: 'user', content: 'go on' }], max_tokens: 10, stream: true };
    const poor = invoke('aws-poor', event(poorKey.rawKey, poorBody));
    await poor.finished;
    const poorReply = parsed(poor);
    const poorId = poorReply.headers['x-sluice-request-id'] as string;
    await until('the cut stream to be settled', async () => !(await openHolds()).has(poorId));
    expect(poorReply.status).toBe(200);
    expect(poorReply.body).toContain('"code":"balance_exhausted"');
    expect(poorReply.body).toContain(`"request_id":"${poorId}"`);
    expect(poorReply.body).not.toContain('data: [DONE]');
    const stillOpen = await openHolds();
    for (const s of sent) {
      expect(s.inv.ended).toBe(false);
      expect(stillOpen.has(requestIdSoFar(s.inv))).toBe(true);
    }

    // Released in waves too, for the store's sake: each wave settles while the rest are still in flight.
    for (let start = 0; start < sent.length; start += WAVE) {
      const wave = sent.slice(start, start + WAVE);
      for (const s of wave) release(s.inv);
      await Promise.all(wave.map((s) => s.inv.finished));
      for (const s of sent.slice(start + WAVE)) expect(s.inv.ended).toBe(false);
    }
    await Promise.all(strangers.map((s) => s.finished));
    await until('every hold to be settled', async () => (await openHolds()).size === 0);

    // The strangers were refused as strangers: no hold, no key of anyone else's.
    const strangerIds: string[] = [];
    for (const s of strangers) {
      const reply = parsed(s);
      expect(reply.status).toBe(401);
      expect(JSON.parse(reply.body)).toMatchObject({ error: { code: 'invalid_api_key' } });
      strangerIds.push(reply.headers['x-sluice-request-id'] as string);
    }

    // Every stream, whole and its own: its trace id, its own counts, its own hold and charge.
    const model = loadCatalogFiles({}).models.find((x) => x.id === 'local/sim-small');
    if (model === undefined || model.inputRateThousandths === null || model.outputRateThousandths === null) throw new Error('no local/sim-small in config/');
    const rates = { inputRateThousandths: model.inputRateThousandths, cachedInputRateThousandths: model.cachedInputRateThousandths ?? model.inputRateThousandths, outputRateThousandths: model.outputRateThousandths };
    const rows = new Map<string, UsageRecord>();
    for (const ws of [...seeded.map((s) => s.workspaceId), poorWs.workspaceId]) {
      for (const row of await usageRows(tables.doc, tableName(tables.prefix, 'usage'), ws)) rows.set(row.requestId, row);
    }
    const requestIds = new Set<string>();
    for (const s of sent) {
      const reply = parsed(s.inv);
      expect(reply.status).toBe(200);
      expect(s.inv.ended).toBe(true);
      const requestId = reply.headers['x-sluice-request-id'] as string;
      requestIds.add(requestId);
      expect(reply.headers['x-sluice-trace-id']).toBe(s.inv.awsRequestId);
      expect(reply.body.endsWith('data: [DONE]\n\n')).toBe(true);
      expect(reply.body).not.toContain('"error"');
      const usage = usageOf(reply.body);
      expect(usage.completion_tokens).toBe(s.body.max_tokens);
      const row = rows.get(requestId);
      expect(row).toBeDefined();
      const counts = { inputTokens: usage.prompt_tokens, cachedInputTokens: 0, outputTokens: s.body.max_tokens, reasoningTokens: 0 };
      const text = JSON.stringify(s.body);
      expect(row).toMatchObject({
        workspaceId: s.workspaceId,
        keyId: s.keyId,
        status: 200,
        outcome: 'ok',
        inputTokens: usage.prompt_tokens,
        outputTokens: s.body.max_tokens,
        chargeMicros: chargeMicros(counts, rates),
        holdMicros: sizeHold(model, s.body, promptBound(Buffer.byteLength(text), s.body), 'chat_completions').amountMicros,
      });
      expect(usage.charge_micros).toBe(row?.chargeMicros);
    }
    expect(requestIds.size).toBe(sent.length);
    // Prompts grow with n, so no two requests counted the same prompt: each row has its own.
    expect(new Set(sent.map((s) => rows.get(parsed(s.inv).headers['x-sluice-request-id'] as string)?.inputTokens)).size).toBe(sent.length);

    // The provider saw each request's own body, once.
    const upstream = sim.recorded.filter((r) => (r.json as { model?: string } | undefined)?.model === 'sim-small');
    expect(upstream.map((r) => { const j = r.json as { max_tokens: number; messages: { content: string }[] }; return `${j.max_tokens}|${j.messages[0]?.content}`; }).sort()).toEqual(
      sent.map((s) => `${s.body.max_tokens}|${s.body.messages[0]?.content}`).sort(),
    );

    // The cut stream: charged what it produced on its own hold, no more.
    const poorRow = rows.get(poorId);
    expect(poorRow).toMatchObject({ workspaceId: poorWs.workspaceId, keyId: poorKey.keyId, outcome: 'balance_exhausted' });
    expect(poorRow?.chargeMicros).toBeLessThanOrEqual(poorRow?.holdMicros ?? -1);

    // Each workspace's money: its own rows, nothing held, the invariant.
    const ledgerTables = { ledger: tableName(tables.prefix, 'ledger'), usage: tableName(tables.prefix, 'usage') };
    for (const ws of [...seeded.map((s) => s.workspaceId), poorWs.workspaceId]) {
      const b = await readBalance(tables.doc, ledgerTables, ws);
      const own = [...rows.values()].filter((r) => r.workspaceId === ws);
      expect(own).toHaveLength(ws === poorWs.workspaceId ? 1 : KEYS_PER_WORKSPACE * REQUESTS_PER_KEY);
      expect(b.heldMicros).toBe(0);
      expect(b.spentMicros).toBe(own.reduce((sum, r) => sum + r.chargeMicros, 0));
      expect(b.creditedMicros).toBe(b.availableMicros + b.heldMicros + b.spentMicros);
    }

    // Telemetry: exactly one EMF request line per request, carrying that request's own figures.
    const lines = stdout.join('').split('\n').filter((l) => l.startsWith('{"_aws"')).map((l) => JSON.parse(l) as Record<string, unknown>);
    const requestLines = lines.filter((l) => typeof l.requestId === 'string' && typeof l.status === 'number');
    expect(requestLines).toHaveLength(sent.length + 1 + strangers.length);
    const lineOf = (id: string): Record<string, unknown> => {
      const mine = requestLines.filter((l) => l.requestId === id);
      expect(mine).toHaveLength(1);
      return mine[0] as Record<string, unknown>;
    };
    for (const s of sent) {
      const id = parsed(s.inv).headers['x-sluice-request-id'] as string;
      const row = rows.get(id) as UsageRecord;
      expect(lineOf(id)).toMatchObject({
        Stage: 'test',
        workspaceId: s.workspaceId,
        keyId: s.keyId,
        model: 'local/sim-small',
        status: 200,
        outcome: 'ok',
        chargeMicros: row.chargeMicros,
        SpendMicros: row.chargeMicros,
        Requests: 1,
        Provider: 'local',
        UpstreamCalls: 1,
        UpstreamErrors: 0,
      });
    }
    expect(lineOf(poorId)).toMatchObject({ workspaceId: poorWs.workspaceId, keyId: poorKey.keyId, outcome: 'balance_exhausted', chargeMicros: poorRow?.chargeMicros });
    for (const id of strangerIds) {
      const line = lineOf(id);
      expect(line).toMatchObject({ status: 401, Code: 'invalid_api_key', Refusals: 1 });
      expect(line.keyId).toBeUndefined();
      expect(line.workspaceId).toBeUndefined();
    }
  } finally {
    spy.mockRestore();
  }
});

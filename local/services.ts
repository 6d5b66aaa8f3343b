/**
 * The pieces of local mode that `npm start` (one region, `start.ts`) and `npm run start:regions`
 * (two regions, `regions/start-regions.ts` and `regions/region-main.ts`) share: the gateway on a
 * port, the aggregator on the usage stream, the sweeper on a timer, and the seeded workspace with
 * its banner. Each region of `start:regions` runs the same three functions as `npm start` does,
 * only in a process of its own.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { ScheduledEvent } from 'aws-lambda';
import { ADMIN_BASE_PATH, handleAdmin, type AdminDeps } from '../lambdas/admin/app';
import { USAGE_STREAM_FILTERS, USAGE_STREAM_MAPPING } from '../lambdas/aggregator/mapping';
import { formatMoney, MICROS_PER_MINOR } from '../lambdas/core/money-format';
import { tableName } from '../lambdas/shared/schema';
import { isAlive } from './dynamo-local';
import { type LambdaServer, serveLambda, type StreamingHandler } from './http-server';
import { makeLambdaContext } from './lambda-shim';
import { type StreamBatchHandler, type StreamPoller, startStreamPoller } from './stream-poller';

/** Credit the dev workspace starts with, in minor units (100.00). */
export const SEED_CREDIT_MINOR = 10_000;
/** The model the printed examples call when the simulator serves. */
export const SIMULATED_MODEL = 'local/sim-small';

export function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A JSON file's content, undefined when it does not exist. */
export async function readJson(path: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(path, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`${path} is not readable JSON (${message(err)}); delete it and start again`);
  }
}

/**
 * Whether a PID is a running `npm start` or `npm run start:regions` of this program (Linux
 * `/proc`; elsewhere: assume so). The two share `.sluice/` and the default ports.
 */
export function isLocalStart(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.includes('start.ts') || cmdline.includes('start-regions.ts');
  } catch {
    return existsSync('/proc') ? false : true;
  }
}

/** A port from a variable: `fallback` when unset; 0 means any free port. */
export function portFrom(env: Readonly<Record<string, string | undefined>>, name: string, fallback: number): number {
  const raw = env[name];
  const port = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error(`${name} must be a port number, got ${raw}`);
  return port;
}

/** Names of the provider-key variables that are set (real providers reachable). */
export function providerKeysSet(providers: readonly { keySource: { env?: string } | 'none' }[], env: NodeJS.ProcessEnv = process.env): string[] {
  return providers
    .map((p) => (p.keySource === 'none' ? undefined : p.keySource.env))
    .filter((name): name is string => name !== undefined && (env[name] ?? '') !== '');
}

/**
 * The gateway handler behind the local Function URL stand-in on 127.0.0.1:`port`.
 *
 * @param portHint how to choose another port, named in the error when this one is taken.
 */
export async function serveGateway(handler: StreamingHandler, port: number, log: (line: string) => void, portHint: string): Promise<LambdaServer> {
  try {
    return await serveLambda({ handler, host: '127.0.0.1', port, log });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new Error(`port ${port} on 127.0.0.1 is already in use: stop what uses it, or ${portHint}`);
    }
    throw err;
  }
}

/** The aggregator on the usage table's stream, with the deployed mapping's batch size and filter. */
export function startAggregator(input: {
  readonly endpoint: string;
  readonly tablePrefix: string;
  readonly handler: StreamBatchHandler;
  readonly log: (line: string) => void;
}): Promise<StreamPoller> {
  return startStreamPoller({
    endpoint: input.endpoint,
    tableName: tableName(input.tablePrefix, 'usage'),
    // The deployed mapping's batch size and filter (its batching window is not waited for locally).
    batchSize: USAGE_STREAM_MAPPING.batchSize,
    filters: USAGE_STREAM_FILTERS,
    handler: input.handler,
    log: input.log,
  });
}

/** The deployed sweeper's timeout (`lib/sweeper.ts`), which its handler keeps a safety margin inside. */
export const SWEEPER_TIMEOUT_MS = 55_000;

/** A timer that runs a scheduled function. */
export interface LocalSchedule {
  /** Clears the timer and waits for a run in flight. */
  stop(): Promise<void>;
}

/**
 * The sweeper on a timer, as its EventBridge schedule runs it deployed: once now (holds a crashed
 * earlier run left open are settled without waiting a period), then every `everyMs`; a run still
 * going when the next is due is skipped, not doubled.
 */
export function startSweeper(input: {
  readonly handler: (event: ScheduledEvent, context: ReturnType<typeof makeLambdaContext>) => Promise<{ readonly swept: number }>;
  readonly everyMs: number;
  /** The function's name in its context and the rule's name (`sluice-local-sweeper`, or one per region). */
  readonly functionName: string;
  /** The event's `region` (`local`, or the region's name). */
  readonly region: string;
  readonly log: (line: string) => void;
  readonly warn: (line: string) => void;
}): LocalSchedule {
  let sweeping: Promise<void> | undefined;
  const sweepOnce = (): void => {
    if (sweeping !== undefined) return;
    const event: ScheduledEvent = {
      version: '0',
      id: randomUUID(),
      'detail-type': 'Scheduled Event',
      source: 'aws.events',
      account: '000000000000',
      time: new Date().toISOString(),
      region: input.region,
      resources: [`arn:aws:events:${input.region}:000000000000:rule/${input.functionName}`],
      detail: {},
    };
    // The deployed function's own timeout, whatever the schedule: with the interval as its budget, a
    // local interval under the sweeper's 10 s safety margin left it no time at all, and it settled
    // nothing. Runs never overlap (a run still going skips the tick).
    const context = makeLambdaContext({ functionName: input.functionName, timeoutMs: SWEEPER_TIMEOUT_MS });
    sweeping = input
      .handler(event, context)
      .then(({ swept }) => {
        if (swept > 0) input.log(`sweeper settled ${swept} expired hold(s)`);
      })
      .catch((err: unknown) => input.warn(`sweeper: ${message(err)}`))
      .finally(() => {
        sweeping = undefined;
      });
  };
  sweepOnce();
  const timer = setInterval(sweepOnce, input.everyMs);
  return {
    async stop() {
      clearInterval(timer);
      await sweeping;
    },
  };
}

/** The seeded dev workspace. */
export interface Seed {
  readonly workspaceId: string;
  /** Only on the start that created the workspace; never stored. */
  readonly rawKey?: string;
}

/** Who the seed's changes are audited as. */
const SEED_PRINCIPAL = 'seed';

/**
 * One change through the management API in process, as `seed`: the very route an operator's
 * command takes, so it is validated and audited the same way. Throws the refusal's message.
 */
export async function seedCall<T>(deps: AdminDeps, method: 'GET' | 'POST' | 'PUT', path: string, body?: Record<string, unknown>): Promise<T> {
  const requestId = `req_${randomUUID().replace(/-/g, '')}`;
  const out = await handleAdmin(
    { method, path: `${ADMIN_BASE_PATH}${path}`, query: {}, body: body === undefined ? undefined : JSON.stringify(body), principal: SEED_PRINCIPAL, requestId },
    deps,
  );
  const parsed = JSON.parse(out.body) as T & { error?: { message?: string } };
  if (out.status >= 400) throw new Error(`seeding the dev workspace: ${parsed.error?.message ?? `the management API answered ${out.status}`}`);
  return parsed;
}

/**
 * Creates the dev workspace, its credit and a key on first start, through the management API,
 * so each is in the audit trail (`workspace.create`, `credit.add`, `key.create`, by `seed`) like
 * every other change to money and keys. Only the workspace id is kept (in `seedFile`, 0600); the
 * raw key is printed once and exists nowhere else.
 */
export async function seedWorkspace(input: {
  readonly deps: AdminDeps;
  readonly doc: DynamoDBDocumentClient;
  readonly tablePrefix: string;
  readonly seedFile: string;
  readonly log: (line: string) => void;
}): Promise<Seed> {
  const { deps, doc, tablePrefix, seedFile } = input;
  const saved = (await readJson(seedFile)) as { workspaceId?: unknown } | undefined;
  if (typeof saved?.workspaceId === 'string') {
    const { Item } = await doc.send(
      new GetCommand({ TableName: tableName(tablePrefix, 'workspaces'), Key: { pk: saved.workspaceId, sk: 'META' } }),
    );
    if (Item !== undefined) return { workspaceId: saved.workspaceId };
    input.log(`workspace ${saved.workspaceId} from ${seedFile} is not in the database (was .dynamodb/ deleted?): seeding a new one`);
  }
  const { workspaceId, ownerMemberId } = await seedCall<{ workspaceId: string; ownerMemberId: string }>(deps, 'POST', '/workspaces', { name: 'dev', ownerEmail: 'dev@localhost' });
  const ws = `/workspaces/${encodeURIComponent(workspaceId)}`;
  // A reference, so the seed's credit is one top-up however the start is retried.
  await seedCall(deps, 'POST', `${ws}/credit`, { amountMinor: SEED_CREDIT_MINOR, reference: 'seed' });
  const { rawKey } = await seedCall<{ rawKey: string }>(deps, 'POST', `${ws}/keys`, { memberId: ownerMemberId, name: 'dev' });
  await writeFile(seedFile, `${JSON.stringify({ workspaceId }, null, 2)}\n`, { mode: 0o600 });
  return { workspaceId, rawKey };
}

/** What the banner shows beside the base URL. */
export interface BannerInput {
  readonly title: string;
  readonly baseUrl: string;
  readonly seed: Seed;
  readonly adminUrl: string;
  readonly adminTokenFile: string;
  readonly consoleUrl: string;
  /** Lines shown after the addresses (the regions, for `start:regions`). */
  readonly extra?: readonly string[];
}

/** The start's banner: where to send requests, the key (the first time only) and examples. */
export function printBanner(input: BannerInput): void {
  const { baseUrl, seed } = input;
  const model = SIMULATED_MODEL;
  const lines = [
    '',
    input.title,
    '',
    `  Base URL   ${baseUrl}`,
    `  Admin API  ${input.adminUrl}/admin/v1  (token in ${input.adminTokenFile}; npm run sluice -- … uses it)`,
    `  Workspace  ${seed.workspaceId}`,
    `  Console    ${input.consoleUrl}/console/  (invite yourself: npx sluice member invite --workspace ${seed.workspaceId} --email you@example.com --owner)`,
    ...(input.extra ?? []),
  ];
  if (seed.rawKey !== undefined) {
    lines.push(
      `  API key    ${seed.rawKey}`,
      `             (shown this once and stored nowhere; credit ${formatMoney(SEED_CREDIT_MINOR * MICROS_PER_MINOR)})`,
      '',
      `  export SLUICE_API_KEY=${seed.rawKey}`,
    );
  } else {
    lines.push(
      '',
      '  The dev key was printed on the first start only. Mint another with:',
      `    npm run sluice -- key create --workspace ${seed.workspaceId}`,
      '  then: export SLUICE_API_KEY=<the key it prints>',
    );
  }
  lines.push(
    '',
    '  curl:',
    `    curl ${baseUrl}/chat/completions \\`,
    '      -H "Authorization: Bearer $SLUICE_API_KEY" -H "Content-Type: application/json" \\',
    `      -d '{"model":"${model}","messages":[{"role":"user","content":"Hello"}],"stream":true}'`,
    '',
    '  openai (Node):',
    `    const client = new OpenAI({ baseURL: '${baseUrl}', apiKey: process.env.SLUICE_API_KEY });`,
    `    const reply = await client.chat.completions.create({ model: '${model}', messages: [{ role: 'user', content: 'Hello' }] });`,
    '',
    'Ctrl-C stops everything.',
    '',
  );
  console.log(lines.join('\n'));
}

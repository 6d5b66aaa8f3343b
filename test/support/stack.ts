/**
 * A whole Sluice for end-to-end tests: fresh tables in the run's DynamoDB Local, the catalog from
 * config/, the upstream simulator on loopback, a seeded workspace with credit and a key, and the
 * real gateway handler served over node:http through the Lambda streaming shim.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { GetCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import OpenAI from 'openai';
import { addCredit, createKey, createWorkspace, importCatalog, type AdminContext } from '../../local/ops';
import { silentTelemetry } from '../../lambdas/adapters/emf-telemetry';
import { loadConfig, type RuntimeConfig } from '../../lambdas/shared/config';
import { tableName } from '../../lambdas/shared/schema';
import type { UsageRecord } from '../../lambdas/shared/records';
import { buildGateway, eventToRequest, lambdaSink, type AwsLambdaRuntime, type Wiring } from '../../lambdas/gateway/wiring';
import type { GatewayDeps } from '../../lambdas/gateway/app';
import { localAwslambda, type LambdaStreamingRuntime } from '../../local/lambda-shim';
import { serveLambda, type LambdaServer, type StreamingHandler } from '../../local/http-server';
import { startSimulator, type Simulator } from '../../local/simulator';
import { testTables, type TestTables } from './dynamo';
import { usageRows as readUsageRows } from '../../lambdas/store/balance';

export interface StackOptions {
  /** Credit for the seeded workspace, minor units. @default 100000 */
  readonly creditMinor?: number;
  /** Extra environment for the gateway's configuration (e.g. SLUICE_KEY_RATE_PER_MINUTE). */
  readonly env?: Readonly<Record<string, string>>;
  /** Replace gateway dependencies (e.g. a counting ledger). */
  readonly overrides?: Partial<GatewayDeps>;
  /** A DynamoDB Local of the test's own (one it may pause) instead of the run's shared one. */
  readonly dynamoEndpoint?: string;
}

export interface Balance {
  readonly availableMicros: number;
  readonly heldMicros: number;
  readonly spentMicros: number;
  readonly creditedMicros: number;
}

export interface TestStack {
  /** Base URL with /v1, as clients take it. */
  readonly baseURL: string;
  readonly sim: Simulator;
  readonly tables: TestTables;
  readonly admin: AdminContext;
  readonly wiring: Wiring;
  readonly config: RuntimeConfig;
  readonly workspaceId: string;
  readonly ownerMemberId: string;
  readonly rawKey: string;
  readonly keyId: string;
  /** The official client on a key (the seeded one by default), without its own retries. */
  client(key?: string): OpenAI;
  balance(workspaceId?: string): Promise<Balance>;
  /** Resolves when no hold of the workspace is open (settlement runs after the reply ends). */
  settled(workspaceId?: string, timeoutMs?: number): Promise<void>;
  usageRows(workspaceId?: string): Promise<UsageRecord[]>;
  /** A new workspace with credit and a key. */
  seed(creditMinor: number): Promise<{ workspaceId: string; ownerMemberId: string; rawKey: string; keyId: string }>;
  close(): Promise<void>;
}

export async function startStack(options: StackOptions = {}): Promise<TestStack> {
  const tables = await testTables(options.dynamoEndpoint);
  const sim = await startSimulator();
  const secretsDir = mkdtempSync(path.join(tmpdir(), 'sluice-secrets-'));
  // The gateway below caches nothing (SLUICE_CACHE_TTL_MS 0), so a limit's arming need not wait for caches.
  const admin: AdminContext = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'local', cacheTtlMs: Number(options.env?.SLUICE_CACHE_TTL_MS ?? 0) };
  await importCatalog(admin, {});
  const seed = async (creditMinor: number): Promise<{ workspaceId: string; ownerMemberId: string; rawKey: string; keyId: string }> => {
    const ws = await createWorkspace(admin, { name: 'test' });
    if (creditMinor > 0) await addCredit(admin, { workspaceId: ws.workspaceId, minor: creditMinor });
    const key = await createKey(admin, { workspaceId: ws.workspaceId });
    return { ...ws, rawKey: key.rawKey, keyId: key.keyId };
  };
  const first = await seed(options.creditMinor ?? 100_000);
  const env: NodeJS.ProcessEnv = {
    SLUICE_STAGE: 'local',
    SLUICE_TABLE_PREFIX: tables.prefix,
    SLUICE_DYNAMODB_ENDPOINT: tables.endpoint,
    SLUICE_SECRET_SOURCE: 'env',
    SLUICE_CACHE_TTL_MS: '0',
    SLUICE_CATALOG_CACHE_TTL_MS: '0',
    SLUICE_LOCAL_UPSTREAM_URL: sim.url,
    SLUICE_LOCAL_SECRETS_FILE: path.join(secretsDir, 'secrets.json'),
    ...options.env,
  };
  const config = loadConfig(env);
  const wiring = buildGateway(config, env, { telemetry: silentTelemetry, ...options.overrides });
  const runtime: LambdaStreamingRuntime = localAwslambda;
  const handler = runtime.streamifyResponse(async (event, responseStream, context) => {
    await wiring.gateway.serve(eventToRequest(event, context.awsRequestId), lambdaSink(runtime as unknown as AwsLambdaRuntime, responseStream));
  }) as StreamingHandler;
  const server: LambdaServer = await serveLambda({ handler, log: () => undefined });
  const baseURL = `${server.url}/v1`;
  const t = (name: Parameters<typeof tableName>[1]): string => tableName(tables.prefix, name);

  const balance = async (workspaceId = first.workspaceId): Promise<Balance> => {
    const out = await tables.doc.send(new GetCommand({ TableName: t('ledger'), Key: { pk: `WS#${workspaceId}`, sk: 'BALANCE' }, ConsistentRead: true }));
    const item = out.Item ?? {};
    const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
    return { availableMicros: n(item.availableMicros), heldMicros: n(item.heldMicros), spentMicros: n(item.spentMicros), creditedMicros: n(item.creditedMicros) };
  };

  return {
    baseURL,
    sim,
    tables,
    admin,
    wiring,
    config,
    ...first,
    client: (key = first.rawKey) => new OpenAI({ baseURL, apiKey: key, maxRetries: 0, timeout: 20_000 }),
    balance,
    async settled(workspaceId = first.workspaceId, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        // Open holds are requests' rows still open.
        const out = await tables.doc.send(new ScanCommand({ TableName: t('usage'), ConsistentRead: true }));
        const open = (out.Items ?? []).filter((h) => h.workspaceId === workspaceId && h.state === 'open');
        if (open.length === 0) return;
        if (Date.now() > deadline) throw new Error(`${open.length} holds still open after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async usageRows(workspaceId = first.workspaceId) {
      // A workspace's rows are spread over shards; the store reads them all, merged by time.
      return readUsageRows(tables.doc, t('usage'), workspaceId);
    },
    seed,
    async close() {
      await server.close();
      wiring.upstream.close();
      wiring.doc.destroy();
      wiring.wire.destroy();
      await sim.close();
      tables.client.destroy();
      rmSync(secretsDir, { recursive: true, force: true });
    },
  };
}

/** SPEC's ledger invariant: every credit is available, held or spent. */
export function expectInvariant(b: Balance): void {
  if (b.creditedMicros !== b.availableMicros + b.heldMicros + b.spentMicros) {
    throw new Error(`ledger invariant broken: credited ${b.creditedMicros} != available ${b.availableMicros} + held ${b.heldMicros} + spent ${b.spentMicros}`);
  }
}

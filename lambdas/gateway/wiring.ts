/**
 * Builds the gateway from configuration with its real adapters, and adapts the Lambda Function
 * URL event and response stream to the runtime-free core. Used by the Lambda handler, local mode,
 * tests and benchmarks alike.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { Writable } from 'node:stream';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { documentClient, wireClient } from '../adapters/dynamo-client';
import { DynamoCatalog } from '../adapters/dynamo-catalog';
import { DynamoDirectory } from '../adapters/dynamo-directory';
import { DynamoLedger } from '../adapters/dynamo-ledger';
import { pooledRandomHex } from '../adapters/random-pool';
import { RegionalLedger } from '../store/regions-ledger';
import { regionSetupFromEnv } from '../store/regions';
import type { DynamoWire } from '../adapters/dynamo-wire';
import { ConsoleTelemetry, EmfTelemetry } from '../adapters/emf-telemetry';
import { HttpUpstream } from '../adapters/http-upstream';
import { LocalSecretSource, SecretsManagerSource } from '../adapters/secrets';
import { tableName } from '../shared/schema';
import { collectBetweenRequests, tuneV8ForRequests } from '../shared/v8-tuning';
import type { RuntimeConfig } from '../shared/config';
import { requestIdDigits } from '../core/request-id';
import { Gateway } from './app';
import type { GatewayDeps, GatewayRequest, ResponseSink, Telemetry } from './ports';

/** The adapters the gateway runs on, exposed so tests and benchmarks can count round trips. */
export interface Wiring {
  readonly gateway: Gateway;
  readonly doc: DynamoDBDocumentClient;
  /** The lean client the ledger and key lookups use on every request. */
  readonly wire: DynamoWire;
  /** The region's ledger in a stage with several regions (`SLUICE_REGIONS`, docs/regions.md), else today's. */
  readonly ledger: DynamoLedger | RegionalLedger;
  readonly directory: DynamoDirectory;
  readonly catalog: DynamoCatalog;
  readonly upstream: HttpUpstream;
}

/** Builds the gateway on DynamoDB, Secrets Manager (or local secrets) and node:http. */
export function buildGateway(config: RuntimeConfig, env: NodeJS.ProcessEnv, overrides: Partial<GatewayDeps> = {}): Wiring {
  // Before the first request: V8 must not decide from mid-request scavenges that a request's objects live long.
  tuneV8ForRequests();
  const doc = documentClient(config);
  const wire = wireClient(config, doc, env);
  const t = (name: Parameters<typeof tableName>[1]): string => tableName(config.tablePrefix, name);
  // Local mode prints a short line per request; deployed stages log EMF for CloudWatch.
  const telemetry: Telemetry = overrides.telemetry ?? (config.stage === 'local' ? new ConsoleTelemetry() : new EmfTelemetry(config.stage));
  const ledgerTables = { ledger: t('ledger'), usage: t('usage'), usageRetentionDays: config.usageRetentionDays };
  const onConflict = (): void => telemetry.count?.('TransactionConflicts', 1);
  const regions = regionSetupFromEnv(env);
  const ledger = regions === undefined ? new DynamoLedger(wire, ledgerTables, onConflict) : new RegionalLedger(wire, ledgerTables, regions, onConflict);
  const directory = new DynamoDirectory(wire, { keys: t('keys'), workspaces: t('workspaces') }, config.cacheTtlMs);
  const catalog = new DynamoCatalog(doc, t('catalog'), config.catalogCacheTtlMs);
  const upstream = new HttpUpstream();
  const secrets =
    config.secretSource === 'env'
      ? new LocalSecretSource(env, env.SLUICE_LOCAL_SECRETS_FILE ?? path.resolve(__dirname, '../../.sluice/secrets.json'))
      : new SecretsManagerSource(new SecretsManagerClient({}));
  // A request id carries its start (`core/request-id.ts`): the store finds its row from it. Its
  // random digits come from a pool the CSPRNG refills every 256 requests (`random-pool.ts`).
  const randomHex = pooledRandomHex(7);
  const idBytes = (): string => requestIdDigits(Date.now(), randomHex());
  const gateway = new Gateway({
    config,
    keys: directory,
    workspaces: directory,
    catalog,
    secrets,
    ledger,
    upstream,
    telemetry,
    env,
    clock: Date.now,
    newId: idBytes,
    // Between invocations, the young generation's collection that would otherwise land mid-request.
    idle: collectBetweenRequests,
    ...overrides,
  });
  return { gateway, doc, wire, ledger, directory, catalog, upstream };
}

/** The Lambda Function URL event as the core's request. */
export function eventToRequest(event: APIGatewayProxyEventV2, traceId: string = randomUUID()): GatewayRequest {
  const headers: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(event.headers ?? {})) headers[name.toLowerCase()] = value;
  const raw = event.body ?? '';
  const body = event.isBase64Encoded ? Buffer.from(raw, 'base64') : Buffer.from(raw, 'utf8');
  return { method: event.requestContext.http.method.toUpperCase(), path: event.rawPath, headers, body, traceId };
}

/** The runtime's `awslambda` global (provided by Lambda, or by the local shim). */
export interface AwsLambdaRuntime {
  streamifyResponse<E, C>(handler: (event: E, responseStream: Writable, context: C) => Promise<void>): (event: E, responseStream: Writable, context: C) => Promise<void>;
  HttpResponseStream: { from(stream: Writable, metadata: { statusCode: number; headers: Record<string, string> }): Writable };
}

/**
 * A response sink over a Lambda response stream: status and headers first, then chunks with
 * backpressure. A chunk the stream takes at once costs no promise and no closure: every write
 * shares one callback, which keeps the stream's first error for the writes after it.
 */
export function lambdaSink(runtime: AwsLambdaRuntime, responseStream: Writable): ResponseSink {
  let stream: Writable | undefined;
  let failure: Error | undefined;
  /** Fails the write waiting for `drain`, if any, when the stream reports an error instead. */
  let failWaiting: ((err: Error) => void) | undefined;
  const written = (err?: Error | null): void => {
    if (err === undefined || err === null) return;
    failure ??= err;
    failWaiting?.(err);
  };
  const sink: ResponseSink & { started: boolean } = {
    started: false,
    start(status, headers) {
      stream = runtime.HttpResponseStream.from(responseStream, { statusCode: status, headers: { ...headers } });
      sink.started = true;
    },
    write(chunk) {
      const s = stream;
      if (s === undefined) return Promise.reject(new Error('write before start'));
      if (failure !== undefined) return Promise.reject(failure);
      if (s.write(chunk, written)) return undefined;
      return new Promise<void>((resolve, reject) => {
        const settle = (err?: Error): void => {
          s.off('drain', onDrain);
          failWaiting = undefined;
          if (err === undefined) resolve();
          else reject(err);
        };
        const onDrain = (): void => settle();
        failWaiting = settle;
        s.once('drain', onDrain);
      });
    },
    end() {
      const s = stream;
      if (s === undefined) return Promise.resolve();
      return new Promise<void>((resolve) => s.end(resolve));
    },
  };
  return sink;
}

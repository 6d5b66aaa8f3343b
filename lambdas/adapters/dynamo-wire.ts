/**
 * DynamoDB's JSON protocol spoken directly, for the gateway's per-request calls (admit, settle,
 * extend, key lookups). Measured on the benchmark machine, the SDK v3 spends 2.5–3 ms of CPU on
 * each TransactWriteItems in its middleware stack (endpoint rules, serde, retry bookkeeping,
 * signing); this client spends a small fraction of that on the same bytes: the command written
 * to DynamoDB JSON in one pass (`dynamo-json.ts`, byte for byte what `@aws-sdk/util-dynamodb`'s
 * `marshall` and `JSON.stringify` make of it), signed by a SigV4 for this one request shape
 * (`sigv4.ts`, tested equal to the SDK's own signer), one write on a keep-alive socket
 * (`http1-pool.ts`), the reply parsed. docs/gateway.md has each part's cost before and after.
 *
 * It answers the lib-dynamodb commands the gateway uses (`TransactWriteCommand`, `UpdateCommand`,
 * `GetCommand`, `BatchGetCommand`) with the DocumentClient's result and error shapes, so the
 * ledger and directory run on either client. What it keeps from the SDK's behaviour:
 * - a `ClientRequestToken` on every TransactWriteItems, reused by its retries, so a retry after a
 *   lost reply cannot apply a transaction twice;
 * - the SDK's retries: up to 4 attempts (its figure for DynamoDB) on network errors, 5xx and
 *   throttling, with jittered exponential backoff; unlike the SDK (no timeout by default), each
 *   attempt is limited (5 s) and so is the whole call (10 s), so a store that stops answering is
 *   a prompt `503 balance_unavailable`, not a request hanging to the function's timeout;
 * - credentials, region and endpoint from the SDK's own providers (resolved by the caller).
 * What it leaves out: clock-skew correction (Lambda's clock is synced), endpoint discovery and
 * account-ID endpoints (the regional endpoint serves every account), response CRC checks (the SDK
 * v3 does not make them either).
 */
import { randomUUID } from 'node:crypto';
import { BatchGetCommand, GetCommand, TransactGetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type {
  BatchGetCommandOutput,
  GetCommandOutput,
  TransactGetCommandOutput,
  TransactWriteCommandOutput,
  UpdateCommandOutput,
} from '@aws-sdk/lib-dynamodb';
import { marshall, unmarshall, type NativeAttributeValue } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { entryJson, transactWriteJson } from './dynamo-json';
import { Http1Pool, type Http1Reply } from './http1-pool';
import { DynamoSigner } from './sigv4';

/** The commands the gateway sends, with the DocumentClient's results: both clients satisfy this. */
export interface DocumentSender {
  send(command: TransactWriteCommand): Promise<TransactWriteCommandOutput>;
  send(command: UpdateCommand): Promise<UpdateCommandOutput>;
  send(command: GetCommand): Promise<GetCommandOutput>;
  send(command: BatchGetCommand): Promise<BatchGetCommandOutput>;
  /** The ledger's consistent snapshot of every slice, read when a refusal is considered. */
  send(command: TransactGetCommand): Promise<TransactGetCommandOutput>;
}

/** AWS credentials as the SDK's providers give them. */
export interface WireCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export interface DynamoWireOptions {
  /** The service endpoint, e.g. `https://dynamodb.eu-west-1.amazonaws.com` or DynamoDB Local's. */
  readonly endpoint: string;
  readonly region: string;
  /** Called before each signature; the SDK's providers cache and refresh. */
  readonly credentials: () => Promise<WireCredentials>;
  /** @default 4 (what the SDK allows DynamoDB calls) */
  readonly maxAttempts?: number;
  /**
   * One attempt's limit, from the moment it has a connection to the whole reply. DynamoDB answers
   * in milliseconds; an attempt this slow is a store that stopped answering (a paused process, a
   * lost connection). @default 5000
   */
  readonly attemptTimeoutMs?: number;
  /**
   * The whole call's limit, attempts and backoff together: a store that does not answer costs a
   * request this long at most before the caller refuses it (`503 balance_unavailable`), instead
   * of hanging. A retry that could not finish in what is left is not started; time spent waiting
   * for a pooled connection counts. @default 10000
   */
  readonly callBudgetMs?: number;
  /**
   * Most requests in flight at once; the rest wait for a socket (that wait counts against the
   * call's budget). Deployed, a function serves one request at a time, so no cap is needed; a
   * test racing 200 admissions in one process against DynamoDB Local may bound what Local has to
   * queue on its lock. @default no cap
   */
  readonly maxSockets?: number;
}

/** The default {@link DynamoWireOptions.callBudgetMs}: the longest a store call may take. */
export const DEFAULT_CALL_BUDGET_MS = 10_000;
/** The default {@link DynamoWireOptions.attemptTimeoutMs}. */
export const DEFAULT_ATTEMPT_TIMEOUT_MS = 5_000;

/** An error from DynamoDB, shaped as the SDK shapes it (`name`, `$fault`, `CancellationReasons`). */
export class DynamoWireError extends Error {
  readonly $fault: 'client' | 'server';
  readonly $metadata: { readonly httpStatusCode?: number; readonly attempts: number };
  readonly CancellationReasons?: { Code?: string; Message?: string; Item?: Record<string, AttributeValue> }[];

  constructor(name: string, message: string, status: number | undefined, attempts: number, reasons?: DynamoWireError['CancellationReasons']) {
    super(message);
    this.name = name;
    this.$fault = status !== undefined && status < 500 ? 'client' : 'server';
    this.$metadata = { httpStatusCode: status, attempts };
    if (reasons !== undefined) this.CancellationReasons = reasons;
  }
}

const TARGET_PREFIX = 'DynamoDB_20120810.';
const CONTENT_TYPE = 'application/x-amz-json-1.0';
const SERVICE = 'dynamodb';
const MARSHAL = { removeUndefinedValues: true } as const;
/** Error codes retried besides 5xx (throttling and transient), as by the SDK's standard mode. */
const RETRYABLE_CODES = new Set([
  'ThrottlingException',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'RequestThrottled',
  'RequestThrottledException',
  'TooManyRequestsException',
  'TransactionInProgressException',
  'LimitExceededException',
]);
const RETRYABLE_NETWORK = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'ENOTFOUND']);

type Json = Record<string, unknown>;
type Av = Record<string, AttributeValue>;

const toAv = (value: Record<string, NativeAttributeValue> | undefined): Av | undefined => (value === undefined ? undefined : marshall(value, MARSHAL));
const fromAv = (value: Av | undefined): Record<string, unknown> | undefined => (value === undefined ? undefined : unmarshall(value));

/** `TableName`, `Key`/`Item` and expression values marshalled; every other field as given (the two rare reads, `BatchGetItem` and `TransactGetItems`). */
function marshalEntry(entry: Json): Json {
  const out: Json = { ...entry };
  if (entry.Key !== undefined) out.Key = toAv(entry.Key as Record<string, NativeAttributeValue>);
  if (entry.Item !== undefined) out.Item = toAv(entry.Item as Record<string, NativeAttributeValue>);
  if (entry.ExpressionAttributeValues !== undefined) out.ExpressionAttributeValues = toAv(entry.ExpressionAttributeValues as Record<string, NativeAttributeValue>);
  return out;
}

/**
 * SigV4 for DynamoDB's one shape of request (POST / with a JSON body): `DynamoSigner`
 * (`sigv4.ts`), its signing key derived once a day. Tested equal to the SDK's own signer.
 */
export class WireSigner {
  private readonly signer: DynamoSigner;

  constructor(region: string, host: string) {
    this.signer = new DynamoSigner(region, host, SERVICE, CONTENT_TYPE);
  }

  /** The headers to send (signed ones plus `authorization`) for this body at this time. */
  sign(target: string, body: Buffer, credentials: WireCredentials, at: Date): Record<string, string> {
    return this.signer.sign(target, body, credentials, at);
  }
}

/** A DynamoDB client for the gateway's hot path; see the module comment. */
export class DynamoWire implements DocumentSender {
  /** HTTP requests made (attempts, retries included). */
  requests = 0;
  private readonly url: URL;
  private readonly signer: WireSigner;
  private readonly pool: Http1Pool;
  private readonly maxAttempts: number;
  private readonly attemptTimeoutMs: number;
  private readonly callBudgetMs: number;

  constructor(private readonly options: DynamoWireOptions) {
    this.url = new URL(options.endpoint);
    // No cap on sockets: a call must never wait in this process for a connection, since that wait
    // would count against its budget. A function on demand serves one request at a time; on Lambda
    // Managed Instances, in local mode and in the tests it serves many at once, and none may queue
    // behind an arbitrary limit.
    this.pool = new Http1Pool(this.url, {
      ...(options.maxSockets !== undefined ? { maxSockets: options.maxSockets } : {}),
      timeoutError: () => Object.assign(new Error('DynamoDB did not answer in time'), { code: 'ETIMEDOUT' }),
    });
    this.signer = new WireSigner(options.region, this.url.host);
    this.maxAttempts = options.maxAttempts ?? 4;
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
    this.callBudgetMs = options.callBudgetMs ?? DEFAULT_CALL_BUDGET_MS;
  }

  send(command: TransactWriteCommand): Promise<TransactWriteCommandOutput>;
  send(command: UpdateCommand): Promise<UpdateCommandOutput>;
  send(command: GetCommand): Promise<GetCommandOutput>;
  send(command: BatchGetCommand): Promise<BatchGetCommandOutput>;
  send(command: TransactGetCommand): Promise<TransactGetCommandOutput>;
  async send(command: TransactWriteCommand | UpdateCommand | GetCommand | BatchGetCommand | TransactGetCommand): Promise<unknown> {
    if (command instanceof TransactWriteCommand) {
      const input = command.input;
      const out = await this.call('TransactWriteItems', transactWriteJson(input as Json, input.ClientRequestToken ?? randomUUID()));
      return { $metadata: {}, ...out } as TransactWriteCommandOutput;
    }
    if (command instanceof UpdateCommand) {
      const out = await this.call('UpdateItem', entryJson(command.input as Json));
      return { $metadata: {}, ...out, Attributes: fromAv(out.Attributes as Av | undefined) } as UpdateCommandOutput;
    }
    if (command instanceof GetCommand) {
      const out = await this.call('GetItem', entryJson(command.input as Json));
      return { $metadata: {}, ...out, Item: fromAv(out.Item as Av | undefined) } as GetCommandOutput;
    }
    if (command instanceof BatchGetCommand) {
      const requestItems: Json = {};
      for (const [table, entry] of Object.entries(command.input.RequestItems ?? {})) {
        requestItems[table] = { ...entry, Keys: (entry.Keys ?? []).map((k) => toAv(k)) };
      }
      const out = await this.call('BatchGetItem', JSON.stringify({ ...command.input, RequestItems: requestItems }));
      const responses: Record<string, Record<string, unknown>[]> = {};
      for (const [table, items] of Object.entries((out.Responses ?? {}) as Record<string, Av[]>)) responses[table] = items.map((i) => unmarshall(i));
      const unprocessed: Json = {};
      for (const [table, entry] of Object.entries((out.UnprocessedKeys ?? {}) as Record<string, { Keys?: Av[] }>)) {
        unprocessed[table] = { ...entry, Keys: (entry.Keys ?? []).map((k) => unmarshall(k)) };
      }
      return { $metadata: {}, ...out, Responses: responses, UnprocessedKeys: unprocessed } as BatchGetCommandOutput;
    }
    if (command instanceof TransactGetCommand) {
      const items = (command.input.TransactItems ?? []).map((item) => ({ Get: marshalEntry(item.Get as Json) }));
      const out = await this.call('TransactGetItems', JSON.stringify({ ...command.input, TransactItems: items }));
      const responses = ((out.Responses ?? []) as { Item?: Av }[]).map((r) => ({ Item: fromAv(r.Item) }));
      return { $metadata: {}, ...out, Responses: responses } as TransactGetCommandOutput;
    }
    throw new TypeError(`DynamoWire does not send ${(command as object).constructor.name}`);
  }

  /** Ends the keep-alive sockets (tests, shutdown). */
  destroy(): void {
    this.pool.destroy();
  }

  /** One operation (its body already JSON), with the standard mode's retries; resolves to the parsed reply. */
  private async call(operation: string, json: string): Promise<Json> {
    const body = Buffer.from(json, 'utf8');
    const target = TARGET_PREFIX + operation;
    const deadline = Date.now() + this.callBudgetMs;
    /** Waits before the next attempt; false when no attempt could finish within the budget. */
    const retryAfterBackoff = async (attempt: number, throttled: boolean): Promise<boolean> => {
      const wait = backoffMs(attempt, throttled);
      // An attempt needs some time of its own; one that would start with next to none is not worth it.
      if (attempt >= this.maxAttempts || Date.now() + wait + MIN_ATTEMPT_MS > deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, wait));
      return true;
    };
    for (let attempt = 1; ; attempt += 1) {
      let reply: Http1Reply;
      try {
        const headers = this.signer.sign(target, body, await this.options.credentials(), new Date());
        reply = await this.post(headers, body, deadline);
      } catch (err) {
        if (isRetryableNetwork(err) && (await retryAfterBackoff(attempt, false))) continue;
        throw err;
      }
      if (reply.status === 200) return reply.body.length === 0 ? {} : (JSON.parse(reply.body.toString('utf8')) as Json);
      const error = toError(reply, attempt);
      const throttled = RETRYABLE_CODES.has(error.name);
      if ((reply.status >= 500 || throttled) && (await retryAfterBackoff(attempt, throttled))) continue;
      throw error;
    }
  }

  /**
   * One attempt: the request's bytes in one write on a pooled keep-alive socket, the reply read
   * whole. Two limits, neither an idle timeout (a store that trickles is as stuck as one that is
   * silent): the attempt's own, from when it has a socket (waiting in the pool behind other calls
   * is not the store being stuck), and the call's budget, from its start. The socket goes with a
   * failed attempt (it may still get the late reply).
   */
  private post(headers: Record<string, string>, body: Buffer, deadline: number): Promise<Http1Reply> {
    this.requests += 1;
    let head = 'POST / HTTP/1.1\r\n';
    for (const name in headers) {
      const value = headers[name] as string;
      // A header value with a line break would end the header early: refused, as Node's client does.
      if (value.includes('\n') || value.includes('\r')) throw new TypeError(`the ${name} header holds a line break`);
      head += `${name}: ${value}\r\n`;
    }
    head += `content-length: ${body.length}\r\nconnection: keep-alive\r\n\r\n`;
    return this.pool.request(head, body, { deadline, attemptTimeoutMs: this.attemptTimeoutMs });
  }
}

function isRetryableNetwork(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && RETRYABLE_NETWORK.has(code);
}

/** Full jitter, as the SDK: base 100 ms (500 ms when throttled), doubling, capped at 20 s. */
function backoffMs(attempt: number, throttled: boolean): number {
  return Math.random() * Math.min(20_000, (throttled ? 500 : 100) * 2 ** (attempt - 1));
}

/** Less time than this left in the budget: no further attempt is started. */
const MIN_ATTEMPT_MS = 50;

function toError(reply: Http1Reply, attempts: number): DynamoWireError {
  let parsed: Json = {};
  try {
    parsed = JSON.parse(reply.body.toString('utf8')) as Json;
  } catch {
    // not JSON (a proxy's page, a truncated reply): the status says enough
  }
  const type = typeof parsed.__type === 'string' ? parsed.__type : '';
  const name = type.includes('#') ? type.slice(type.lastIndexOf('#') + 1) : type || (reply.status >= 500 ? 'InternalServerError' : 'UnknownError');
  const message = typeof parsed.message === 'string' ? parsed.message : typeof parsed.Message === 'string' ? parsed.Message : `DynamoDB answered ${reply.status}`;
  // As the DocumentClient leaves them: a reason's `Item`, if asked for, stays in attribute values.
  const reasons = Array.isArray(parsed.CancellationReasons) ? (parsed.CancellationReasons as DynamoWireError['CancellationReasons']) : undefined;
  return new DynamoWireError(name, message, reply.status, attempts, reasons);
}

/**
 * The gateway's ports answered from memory: the use case runs in-process with no socket, no
 * DynamoDB Local and no simulator. Used by the in-process use-case tests (to pin the order of
 * checks, the fallback rules and every settlement outcome in milliseconds) and by
 * `bench/own-cpu.ts` (to measure Sluice's own CPU). Each port does the least it can: a map
 * lookup, a canned reply, integer bookkeeping of the ledger's four figures.
 */
import { Readable } from 'node:stream';
import { loadCatalogFiles } from '../../local/ops';
import { hashKey } from '../../lambdas/core/api-key';
import { Gateway } from '../../lambdas/gateway/app';
import type {
  AdmissionLimits,
  AdmitOutcome,
  AdmitRequest,
  Catalog,
  GatewayDeps,
  GatewayRequest,
  KeyDirectory,
  Ledger,
  Refusal,
  ResponseSink,
  SecretSource,
  Settlement,
  Telemetry,
  Upstream,
  UpstreamRequest,
  UpstreamResponse,
  WorkspaceDirectory,
} from '../../lambdas/gateway/ports';
import type { CatalogModel, ProviderConfig } from '../../lambdas/shared/catalog-types';
import { loadConfig } from '../../lambdas/shared/config';
import type { HoldRecord, KeyRecord, MemberRecord, ProfileRecord, WorkspaceRecord } from '../../lambdas/shared/records';

/** The seeded key: `slc_dev_` and 43 `a`s. */
export const RAW_KEY = `slc_dev_${'a'.repeat(43)}`;
export const WORKSPACE_ID = 'ws_mem';
export const KEY_ID = 'key_mem';

/** A port call that fails, for fault tests: which method, and what it throws. */
export type LedgerFault = Partial<Record<'admit' | 'settle' | 'extend' | 'countRequest' | 'release', Error>>;

/**
 * The ledger's four figures in memory: credited = available + held + spent. Admission holds the
 * amount if available covers it (or refuses as told), settlement charges and returns the rest,
 * once per hold.
 */
export class MemoryLedger implements Ledger {
  creditedMicros: number;
  availableMicros: number;
  heldMicros = 0;
  spentMicros = 0;
  readonly open = new Map<string, HoldRecord>();
  readonly settlements: { readonly hold: HoldRecord; readonly settlement: Settlement }[] = [];
  readonly admitted: AdmitRequest[] = [];
  counted = 0;
  /** Answer the next admissions with this refusal. */
  refusal: Refusal | undefined;
  /** Answer `countRequest` and admissions with this Retry-After (the key's rate is spent). */
  rateRetryAfter: number | undefined;
  /** Extensions allowed before `extend` refuses (the balance runs out part way). */
  extensionsLeft = Number.POSITIVE_INFINITY;
  faults: LedgerFault = {};

  /** `record` keeps every admission and settlement for tests to read; the benchmark keeps none. */
  constructor(
    creditMicros: number,
    private readonly record = true,
  ) {
    this.creditedMicros = creditMicros;
    this.availableMicros = creditMicros;
  }

  admit(r: AdmitRequest): Promise<AdmitOutcome> {
    if (this.faults.admit !== undefined) return Promise.reject(this.faults.admit);
    if (this.record) this.admitted.push(r);
    // The real admission counts the key's rate in its own transaction.
    this.counted += 1;
    if (this.rateRetryAfter !== undefined) return Promise.resolve({ admitted: false, refusal: { kind: 'rate_limit_exceeded', retryAfterSeconds: this.rateRetryAfter } });
    if (this.refusal !== undefined) return Promise.resolve({ admitted: false, refusal: this.refusal });
    if (r.amountMicros > this.availableMicros) return Promise.resolve({ admitted: false, refusal: { kind: 'insufficient_credit', availableMicros: this.availableMicros } });
    this.availableMicros -= r.amountMicros;
    this.heldMicros += r.amountMicros;
    const hold: HoldRecord = {
      holdId: r.holdId,
      workspaceId: r.workspaceId,
      keyId: r.keyId,
      family: r.family,
      requestedModel: r.requestedModel,
      amountMicros: r.amountMicros,
      inputMicros: r.inputMicros,
      windows: [],
      byok: r.byok,
      createdAt: r.now,
      expiresAt: r.expiresAt,
    };
    this.open.set(hold.holdId, hold);
    return Promise.resolve({ admitted: true, hold });
  }

  settle(hold: HoldRecord, settlement: Settlement): Promise<boolean> {
    if (this.faults.settle !== undefined) return Promise.reject(this.faults.settle);
    const held = this.open.get(hold.holdId);
    if (held === undefined) return Promise.resolve(false);
    this.open.delete(hold.holdId);
    const charge = Math.min(settlement.chargeMicros, held.amountMicros);
    this.heldMicros -= held.amountMicros;
    this.availableMicros += held.amountMicros - charge;
    this.spentMicros += charge;
    if (this.record) this.settlements.push({ hold: held, settlement });
    return Promise.resolve(true);
  }

  /** Request ids released after an admission fault, in order. */
  readonly released: string[] = [];

  release(_workspaceId: string, requestId: string, _now: number): Promise<void> {
    if (this.faults.release !== undefined) return Promise.reject(this.faults.release);
    if (this.record) this.released.push(requestId);
    const held = this.open.get(requestId);
    if (held === undefined) return Promise.resolve();
    // As a settlement charging 0: the whole hold goes back.
    this.open.delete(requestId);
    this.heldMicros -= held.amountMicros;
    this.availableMicros += held.amountMicros;
    return Promise.resolve();
  }

  extend(hold: HoldRecord, extraMicros: number, _limits: AdmissionLimits, _now: number): Promise<boolean> {
    if (this.faults.extend !== undefined) return Promise.reject(this.faults.extend);
    const held = this.open.get(hold.holdId);
    if (held === undefined || this.extensionsLeft <= 0 || extraMicros > this.availableMicros) return Promise.resolve(false);
    this.extensionsLeft -= 1;
    this.availableMicros -= extraMicros;
    this.heldMicros += extraMicros;
    this.open.set(hold.holdId, { ...held, amountMicros: held.amountMicros + extraMicros });
    return Promise.resolve(true);
  }

  countRequest(): Promise<{ readonly retryAfterSeconds?: number }> {
    if (this.faults.countRequest !== undefined) return Promise.reject(this.faults.countRequest);
    this.counted += 1;
    return Promise.resolve(this.rateRetryAfter === undefined ? {} : { retryAfterSeconds: this.rateRetryAfter });
  }

  /** SPEC's invariant, and nothing left held once every request has settled. */
  invariantHolds(): boolean {
    return this.creditedMicros === this.availableMicros + this.heldMicros + this.spentMicros;
  }
}

/** One canned provider reply: a status, headers, and a body as chunks (or a failure to connect). */
export interface CannedReply {
  readonly status?: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly chunks?: readonly (string | Buffer)[];
  /** The body breaks off with this error after its chunks. */
  readonly breakAfter?: Error;
  /** The call fails before any status (connection refused). */
  readonly connectError?: Error;
  /** The call never answers until aborted. */
  readonly hang?: boolean;
}

/**
 * Replies per provider model id (what the body's `model` names upstream); records every call.
 * With `record` off (the benchmark) the body is not even parsed, so the port costs next to nothing.
 */
export class ScriptedUpstream implements Upstream {
  readonly calls: { readonly url: string; readonly model: unknown; readonly body: Record<string, unknown> }[] = [];
  constructor(
    public replies: (providerModelId: string) => CannedReply,
    private readonly record = true,
  ) {}

  send(request: UpstreamRequest): Promise<UpstreamResponse> {
    let model = '';
    if (this.record) {
      const body = JSON.parse(request.body.toString('utf8')) as Record<string, unknown>;
      this.calls.push({ url: request.url, model: body.model, body });
      model = String(body.model);
    }
    const reply = this.replies(model);
    if (reply.connectError !== undefined) return Promise.reject(reply.connectError);
    if (reply.hang === true) {
      return new Promise((_resolve, reject) => request.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
    }
    const given = reply.chunks ?? [];
    const chunks = given.some((c) => typeof c === 'string') ? given.map((c) => (typeof c === 'string' ? Buffer.from(c) : c)) : given;
    const breakAfter = reply.breakAfter;
    const body$ =
      breakAfter === undefined
        ? Readable.from(chunks)
        : Readable.from(
            (async function* () {
              yield* chunks;
              throw breakAfter;
            })(),
          );
    return Promise.resolve({ status: reply.status ?? 200, headers: reply.headers ?? {}, body: body$ });
  }
}

/** A sink that keeps what it is given; `failAfter` writes make it fail as a client that went away. */
export class CollectingSink implements ResponseSink {
  started = false;
  status = 0;
  headers: Readonly<Record<string, string>> = {};
  readonly chunks: Buffer[] = [];
  ended = false;
  constructor(private failAfter = Number.POSITIVE_INFINITY) {}

  start(status: number, headers: Readonly<Record<string, string>>): void {
    this.started = true;
    this.status = status;
    this.headers = headers;
  }

  write(chunk: Buffer): Promise<void> | undefined {
    if (this.failAfter <= 0) return Promise.reject(new Error('the client went away'));
    this.failAfter -= 1;
    this.chunks.push(chunk);
    return undefined;
  }

  end(): Promise<void> {
    this.ended = true;
    return Promise.resolve();
  }

  get text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }

  json(): Record<string, unknown> {
    return JSON.parse(this.text) as Record<string, unknown>;
  }
}

/** The catalog files as the catalog port. */
export function memoryCatalog(): Catalog {
  const { providers, models } = loadCatalogFiles();
  const byId = new Map<string, CatalogModel>(models.map((m) => [m.id, m]));
  const byName = new Map<string, ProviderConfig>(providers.map((p) => [p.name, p]));
  return {
    model: (id) => Promise.resolve(byId.get(id)),
    models: () => Promise.resolve(models),
    provider: (name) => Promise.resolve(byName.get(name)),
    providers: () => Promise.resolve(providers),
  };
}

/** Keys, workspaces, members and profiles in maps. */
export class MemoryDirectory implements KeyDirectory, WorkspaceDirectory {
  readonly keys = new Map<string, KeyRecord>();
  readonly workspaces = new Map<string, WorkspaceRecord>();
  readonly members = new Map<string, MemberRecord>();
  readonly profiles = new Map<string, ProfileRecord>();

  findByHash(keyHash: string): Promise<KeyRecord | undefined> {
    return Promise.resolve(this.keys.get(keyHash));
  }
  workspace(workspaceId: string): Promise<WorkspaceRecord | undefined> {
    return Promise.resolve(this.workspaces.get(workspaceId));
  }
  member(_workspaceId: string, memberId: string): Promise<MemberRecord | undefined> {
    return Promise.resolve(this.members.get(memberId));
  }
  profile(_workspaceId: string, identifier: string): Promise<ProfileRecord | undefined> {
    return Promise.resolve(this.profiles.get(identifier));
  }
}

/** What {@link memoryGateway} builds, with every port exposed for the test or the benchmark to steer. */
export interface MemoryGateway {
  readonly gateway: Gateway;
  readonly ledger: MemoryLedger;
  readonly directory: MemoryDirectory;
  readonly upstream: ScriptedUpstream;
  readonly secrets: Map<string, string>;
  /** Replaces the seeded workspace's record (a pause, a permitted set, a profile, BYOK). */
  setWorkspace(change: Partial<WorkspaceRecord>): void;
  setKey(change: Partial<KeyRecord>): void;
  /** Serves one request to a fresh collecting sink. */
  serve(request: Partial<GatewayRequest> & { readonly json?: unknown }, sink?: CollectingSink): Promise<CollectingSink>;
}

export interface MemoryGatewayOptions {
  readonly creditMicros?: number;
  readonly env?: Readonly<Record<string, string>>;
  readonly telemetry?: Telemetry;
  readonly replies?: (providerModelId: string) => CannedReply;
  readonly clock?: () => number;
  /** Keep every upstream call, admission and settlement (tests); off for the benchmark. @default true */
  readonly record?: boolean;
  /** The gateway's `idle` port (called when no request is in flight); absent: none. */
  readonly idle?: () => void;
}

const silent: Telemetry = { request: () => undefined };

/** A gateway on in-memory ports with one workspace, one key and the repository's catalog. */
export function memoryGateway(options: MemoryGatewayOptions = {}): MemoryGateway {
  const clock = options.clock ?? Date.now;
  const now = clock();
  const ledger = new MemoryLedger(options.creditMicros ?? 1_000_000_000_000, options.record ?? true);
  const directory = new MemoryDirectory();
  const keyHash = hashKey(RAW_KEY);
  directory.keys.set(keyHash, { keyHash, keyId: KEY_ID, workspaceId: WORKSPACE_ID, visible: 'slc_dev_…aaaa', createdAt: now });
  directory.workspaces.set(WORKSPACE_ID, { pk: WORKSPACE_ID, sk: 'META', workspaceId: WORKSPACE_ID, name: 'mem', createdAt: now, paused: false });
  const upstream = new ScriptedUpstream(options.replies ?? (() => ({ status: 200, chunks: ['{}'] })), options.record ?? true);
  const secrets = new Map<string, string>();
  const secretSource: SecretSource = { get: (name) => Promise.resolve(secrets.get(name)) };
  let id = 0;
  const deps: GatewayDeps = {
    config: loadConfig({ SLUICE_STAGE: 'test', SLUICE_KEY_RATE_PER_MINUTE: '100000000', ...options.env }),
    keys: directory,
    workspaces: directory,
    catalog: memoryCatalog(),
    secrets: secretSource,
    ledger,
    upstream,
    telemetry: options.telemetry ?? silent,
    env: { SLUICE_LOCAL_UPSTREAM_URL: 'http://127.0.0.1:9/v1' },
    clock,
    newId: () => `mem${(id += 1)}`,
    ...(options.idle !== undefined ? { idle: options.idle } : {}),
  };
  const gateway = new Gateway(deps);
  return {
    gateway,
    ledger,
    directory,
    upstream,
    secrets,
    setWorkspace(change) {
      const ws = directory.workspaces.get(WORKSPACE_ID) as WorkspaceRecord;
      directory.workspaces.set(WORKSPACE_ID, { ...ws, ...change });
    },
    setKey(change) {
      const key = directory.keys.get(keyHash) as KeyRecord;
      directory.keys.set(keyHash, { ...key, ...change });
    },
    async serve(request, sink = new CollectingSink()) {
      const body = request.body ?? (request.json === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(request.json)));
      await gateway.serve(
        {
          method: request.method ?? 'POST',
          path: request.path ?? '/v1/chat/completions',
          headers: request.headers ?? { authorization: `Bearer ${RAW_KEY}`, 'content-type': 'application/json' },
          body,
          traceId: request.traceId ?? 'trace',
        },
        sink,
      );
      return sink;
    },
  };
}

/**
 * The gateway's request flow, independent of the runtime: a request and a response sink in,
 * SPEC's behaviour out. Checks run in DESIGN's order, so the cheapest refusal comes first and
 * nothing is held before the last check passes.
 */
import { hashKey, isKeyShaped } from '../core/api-key';
import { SluiceError } from '../core/errors';
import { parseModelField } from '../core/model-id';
import { storeRefusal } from '../core/request-fields';
import { MICROS_PER_MINOR, formatMinor, promptBound, sizeHold, type HoldSize } from '../core/pricing';
import type { CatalogModel } from '../shared/catalog-types';
import type { RuntimeConfig } from '../shared/config';
import type { EndpointFamily, HoldRecord, KeyRecord, WorkspaceRecord } from '../shared/records';
import { catalogEntry, modelDetail } from './catalog-view';
import { forward } from './forward';
import type { AdmissionLimits, Catalog, KeyDirectory, Ledger, Refusal, ResponseSink, SecretSource, Telemetry, Upstream, WorkspaceDirectory } from './ports';
import { resolveModel, type Candidate } from './resolve';
import { requestIdHeaders, writeErrorResponse } from './respond';
import { serviceKeyAvailable } from './providers';

/** SPEC: bodies over this many bytes are refused 413. */
export const MAX_BODY_BYTES = 8_388_608;
/** SPEC's default spend rate cap, minor units per rolling 60 s. */
export const DEFAULT_SPEND_RATE_CAP_MINOR = 5000;

export interface GatewayDeps {
  readonly config: RuntimeConfig;
  readonly keys: KeyDirectory;
  readonly workspaces: WorkspaceDirectory;
  readonly catalog: Catalog;
  readonly secrets: SecretSource;
  readonly ledger: Ledger;
  readonly upstream: Upstream;
  readonly telemetry: Telemetry;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly clock: () => number;
  readonly newId: () => string;
}

/** A request as the runtime adapter hands it over. Header names are lower case. */
export interface GatewayRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body: Buffer;
  /** An id for tracing the invocation (the Lambda request id). */
  readonly traceId: string;
}

type Route = { kind: 'chat' } | { kind: 'responses' } | { kind: 'models' } | { kind: 'model'; id: string };

const ROUTES: readonly { readonly match: (p: string) => Route | undefined; readonly allow: string }[] = [
  { match: (p) => (p === '/v1/chat/completions' ? { kind: 'chat' } : undefined), allow: 'POST' },
  { match: (p) => (p === '/v1/responses' ? { kind: 'responses' } : undefined), allow: 'POST' },
  { match: (p) => (p === '/v1/models' ? { kind: 'models' } : undefined), allow: 'GET' },
  {
    match: (p) => {
      if (!p.startsWith('/v1/models/') || p.length === '/v1/models/'.length) return undefined;
      try {
        return { kind: 'model', id: decodeURIComponent(p.slice('/v1/models/'.length)) };
      } catch {
        return undefined;
      }
    },
    allow: 'GET',
  },
];

/** The method a served path takes (its `Allow`), or undefined for a path Sluice does not serve. */
export function allowedMethod(path: string): string | undefined {
  return ROUTES.find((r) => r.match(path) !== undefined)?.allow;
}

/** What the rest of the flow knows once the key is accepted. */
interface Caller {
  readonly key: KeyRecord;
  readonly workspace: WorkspaceRecord;
}

/** Per-request state that telemetry reports at the end. */
interface Trace {
  readonly requestId: string;
  readonly startedAt: number;
  workspaceId?: string;
  keyId?: string;
  model?: string;
  status?: number;
  code?: string | null;
  servedBy?: string;
  chargeMicros?: number;
  firstByteMs?: number;
  outcome?: string;
}

export class Gateway {
  constructor(private readonly deps: GatewayDeps) {}

  /** Serves one request to completion, settlement included. Never throws. */
  async serve(req: GatewayRequest, sink: ResponseSink): Promise<void> {
    const trace: Trace = { requestId: `req_${this.deps.newId()}`, startedAt: this.deps.clock() };
    try {
      await this.handle(req, sink, trace);
    } catch (err) {
      await this.refuse(sink, trace, err);
    } finally {
      this.deps.telemetry.request({
        requestId: trace.requestId,
        workspaceId: trace.workspaceId,
        keyId: trace.keyId,
        model: trace.model,
        status: trace.status,
        code: trace.code ?? undefined,
        servedBy: trace.servedBy,
        outcome: trace.outcome,
        chargeMicros: trace.chargeMicros,
        firstByteMs: trace.firstByteMs,
        durationMs: this.deps.clock() - trace.startedAt,
      });
    }
  }

  private async refuse(sink: ResponseSink, trace: Trace, err: unknown): Promise<void> {
    if (!(err instanceof SluiceError)) {
      // Faults are logged by kind only: an error object could carry a body fragment.
      console.error(JSON.stringify({ level: 'error', requestId: trace.requestId, fault: err instanceof Error ? err.name : typeof err }));
    }
    const sent = await writeErrorResponse(sink, trace.requestId, err);
    trace.status = sent.status;
    trace.code = sent.code;
  }

  private async handle(req: GatewayRequest, sink: ResponseSink, trace: Trace): Promise<void> {
    const { clock } = this.deps;
    // 1. A declared length over the ceiling is refused before a byte of the body is looked at.
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > MAX_BODY_BYTES) throw tooLarge();

    // 2. The bearer key: shape first (nothing looked up), then lookup, then expiry.
    const caller = await this.authenticate(req.headers.authorization, clock());
    trace.workspaceId = caller.workspace.workspaceId;
    trace.keyId = caller.key.keyId;

    // 3. Route and method.
    let route: Route | undefined;
    let allow: string | undefined;
    for (const r of ROUTES) {
      const m = r.match(req.path);
      if (m !== undefined) {
        route = m;
        allow = r.allow;
        break;
      }
    }
    if (route === undefined || allow === undefined) {
      throw await this.counted(caller, new SluiceError('endpoint_not_supported', `Sluice does not serve ${req.method} ${req.path}.`));
    }
    if (req.method !== allow) {
      throw await this.counted(caller, new SluiceError('method_not_allowed', `${req.method} is not allowed on ${req.path}; use ${allow}.`, { Allow: allow }));
    }

    if (route.kind === 'models' || route.kind === 'model') {
      // GET requests count against the key's rate here; they hold nothing.
      await this.countOrRefuse(caller);
      if (caller.workspace.paused) throw pausedError();
      await (route.kind === 'models' ? this.listModels(caller, sink, trace) : this.readModel(route.id, sink, trace));
      return;
    }
    const family: EndpointFamily = route.kind === 'chat' ? 'chat_completions' : 'responses';
    await this.completion(req, family, caller, sink, trace);
  }

  /** Refusals between authentication and admission still count one request against the key's rate. */
  private async counted(caller: Caller, err: SluiceError): Promise<SluiceError> {
    try {
      await this.countOrRefuse(caller);
    } catch (rateErr) {
      // Only the rate limit outranks the refusal; a ledger fault while counting does not.
      if (rateErr instanceof SluiceError && rateErr.kind === 'rate_limit_exceeded') return rateErr;
    }
    return err;
  }

  private async countOrRefuse(caller: Caller): Promise<void> {
    let result: { readonly retryAfterSeconds?: number };
    try {
      result = await this.deps.ledger.countRequest(caller.workspace.workspaceId, caller.key.keyId, this.deps.config.keyRatePerMinute, this.deps.clock());
    } catch {
      throw new SluiceError('balance_unavailable', 'The ledger cannot be reached right now; try again shortly.');
    }
    if (result.retryAfterSeconds !== undefined) throw rateLimited(this.deps.config.keyRatePerMinute, result.retryAfterSeconds);
  }

  private async authenticate(authorization: string | undefined, now: number): Promise<Caller> {
    const match = authorization === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match === null) {
      throw new SluiceError('invalid_api_key', 'You did not provide an API key. Send it in the Authorization header as: Bearer <API_KEY>.');
    }
    const raw = match[1] as string;
    if (!isKeyShaped(raw)) {
      throw new SluiceError(
        'invalid_api_key',
        'The API key format is wrong: a Sluice key is slc_live_, slc_stg_ or slc_dev_ followed by 43 characters. Check that it is not another provider\'s key.',
      );
    }
    const incorrect = (): SluiceError => new SluiceError('invalid_api_key', 'Incorrect API key provided.');
    let key: KeyRecord | undefined;
    let workspace: WorkspaceRecord | undefined;
    try {
      key = await this.deps.keys.findByHash(hashKey(raw));
      if (key !== undefined && key.revokedAt === undefined) workspace = await this.deps.workspaces.workspace(key.workspaceId);
    } catch {
      // The store is not answering (DynamoWire gives up within its call budget): SPEC's 503 that clears on its own.
      throw new SluiceError('balance_unavailable', 'The server could not check the API key right now; try again shortly.');
    }
    if (key === undefined || key.revokedAt !== undefined || workspace === undefined) throw incorrect();
    // Expiry is checked before the rate limiter, so an expired key never consumes that allowance.
    if (key.expiresAt !== undefined && key.expiresAt <= now) {
      throw new SluiceError('key_expired', `This API key expired at ${new Date(key.expiresAt).toISOString()}. Create a new key; expired keys are not renewed.`);
    }
    return { key, workspace };
  }

  private async listModels(caller: Caller, sink: ResponseSink, trace: Trace): Promise<void> {
    const { catalog } = this.deps;
    let models: readonly CatalogModel[];
    let providers: Awaited<ReturnType<Catalog['providers']>>;
    try {
      [models, providers] = await Promise.all([catalog.models(), catalog.providers()]);
    } catch {
      throw new SluiceError('model_pricing_unreadable', 'The model catalog cannot be read right now; try again shortly.');
    }
    const usable = new Set<string>();
    for (const p of providers) {
      if (caller.workspace.byok?.[p.name] !== undefined || (await serviceKeyAvailable(p, this.deps))) usable.add(p.name);
    }
    if (usable.size === 0) throw new SluiceError('no_provider_configured', 'No model provider is configured for this service.');
    const permittedSet = caller.workspace.permittedModels;
    const data = models
      .filter((m) => m.status === 'served' && usable.has(m.provider) && (permittedSet === undefined || permittedSet.includes(m.id)))
      .map(catalogEntry);
    await this.sendJson(sink, trace, 200, { object: 'list', data });
  }

  private async readModel(id: string, sink: ResponseSink, trace: Trace): Promise<void> {
    let model: CatalogModel | undefined;
    try {
      model = await this.deps.catalog.model(id);
    } catch {
      throw new SluiceError('model_pricing_unreadable', 'The model catalog cannot be read right now; try again shortly.');
    }
    if (model === undefined) throw new SluiceError('model_not_found', `The model '${id}' does not exist in the catalog.`);
    await this.sendJson(sink, trace, 200, modelDetail(model));
  }

  private async sendJson(sink: ResponseSink, trace: Trace, status: number, body: unknown): Promise<void> {
    trace.status = status;
    sink.start(status, { 'content-type': 'application/json', ...requestIdHeaders(trace.requestId) });
    await sink.write(Buffer.from(JSON.stringify(body)));
    await sink.end();
  }

  private async completion(req: GatewayRequest, family: EndpointFamily, caller: Caller, sink: ResponseSink, trace: Trace): Promise<void> {
    const { deps } = this;
    const now = deps.clock();
    // Everything refused before admission still counts one request against the key's rate,
    // so a rate-limited key meets its 429 first, as DESIGN's order has it.
    const refuse = async (err: SluiceError): Promise<never> => {
      throw await this.counted(caller, err);
    };

    // 4-5. The body, read to the ceiling, then parsed.
    if (req.body.length > MAX_BODY_BYTES) return refuse(tooLarge());
    const text = req.body.toString('utf8');
    let body: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
        return refuse(new SluiceError('invalid_body', 'The request body must be a JSON object.'));
      }
      body = parsed as Record<string, unknown>;
    } catch {
      return refuse(new SluiceError('invalid_json', 'The request body is not valid JSON.'));
    }

    // 6. The model field, then the responses-only `store` rule.
    let ref;
    try {
      ref = parseModelField(body.model);
    } catch (err) {
      return refuse(err as SluiceError);
    }
    trace.model = ref.id;
    const storeError = storeRefusal(family, body);
    if (storeError !== undefined) return refuse(storeError);

    // 7. Resolution against catalog, profiles and the permitted set.
    let resolution;
    try {
      resolution = await resolveModel(ref, family, caller.workspace, deps.catalog, deps.workspaces);
    } catch (err) {
      return refuse(err instanceof SluiceError ? err : new SluiceError('model_pricing_unreadable', 'The model catalog cannot be read right now.'));
    }
    const candidates: Candidate[] = [];
    for (const c of resolution.candidates) {
      if (c.byokSecret !== undefined || (await serviceKeyAvailable(c.provider, deps))) candidates.push(c);
    }
    if (candidates.length === 0) {
      return refuse(new SluiceError('no_provider_configured', `No provider key is configured for ${resolution.candidates.map((c) => c.provider.name).join(', ')}.`));
    }

    // 8. The owner's pause.
    if (caller.workspace.paused) return refuse(pausedError());

    // 9. Pricing and the ceiling: the hold covers the most expensive candidate.
    // A route drops a member it cannot price (no maximum output and no ceiling sent, a prompt
    // too large for its window) and is refused only when no member is left.
    const bound = promptBound(req.body.length, body);
    let size: HoldSize | undefined;
    let unpriced: SluiceError | undefined;
    const priced: Candidate[] = [];
    for (const c of candidates) {
      if (c.byokSecret !== undefined) {
        priced.push(c);
        continue;
      }
      try {
        const s = sizeHold(c.model, body, bound, family);
        if (size === undefined || s.amountMicros > size.amountMicros) size = s;
        priced.push(c);
      } catch (err) {
        if (!(err instanceof SluiceError)) throw err;
        unpriced ??= err;
      }
    }
    if (priced.length === 0) return refuse(unpriced ?? new SluiceError('model_not_priceable', 'No model of this route can be priced right now.'));
    const byok = size === undefined;

    // 10. Admission: one transaction over balance, hold and every limit window.
    const limits = await this.limitsFor(caller);
    const admitted = await this.admit(caller, family, ref.id, size, byok, limits, now, trace);
    if (!admitted.ok) return refuse(admitted.error);

    await forward({
      deps,
      body: text,
      parsed: body,
      family,
      requestedModel: ref.id,
      route: resolution.route,
      candidates: priced,
      hold: admitted.hold,
      holdSize: size,
      limits,
      sink,
      requestId: trace.requestId,
      traceId: req.traceId,
      startedAt: trace.startedAt,
      onStatus: (status, code) => {
        trace.status = status;
        trace.code = code;
      },
      onSettled: (fields) => Object.assign(trace, fields),
    });
  }

  private async limitsFor(caller: Caller): Promise<AdmissionLimits> {
    const { key, workspace } = caller;
    let memberLimitMicros: number | undefined;
    if (key.memberId !== undefined) {
      try {
        memberLimitMicros = (await this.deps.workspaces.member(workspace.workspaceId, key.memberId))?.monthlyLimitMicros;
      } catch {
        throw new SluiceError('balance_unavailable', 'The member limits cannot be read right now; try again shortly.');
      }
    }
    return {
      keyLimitMicros: key.creditLimitMicros,
      keyWindow: key.creditWindow ?? 'monthly',
      memberLimitMicros,
      workspaceLimitMicros: workspace.monthlyLimitMicros,
      spendRateCapMicros: (workspace.spendRateCapMinor ?? DEFAULT_SPEND_RATE_CAP_MINOR) * MICROS_PER_MINOR,
      keyRatePerMinute: this.deps.config.keyRatePerMinute,
    };
  }

  private async admit(
    caller: Caller,
    family: EndpointFamily,
    requestedModel: string,
    size: HoldSize | undefined,
    byok: boolean,
    limits: AdmissionLimits,
    now: number,
    trace: Trace,
  ): Promise<{ ok: true; hold: HoldRecord } | { ok: false; error: SluiceError }> {
    const { config } = this.deps;
    let outcome;
    try {
      outcome = await this.deps.ledger.admit({
        holdId: trace.requestId,
        workspaceId: caller.workspace.workspaceId,
        keyId: caller.key.keyId,
        memberId: caller.key.memberId,
        family,
        requestedModel,
        amountMicros: size?.amountMicros ?? 0,
        inputMicros: size?.inputMicros ?? 0,
        byok,
        limits,
        now,
        expiresAt: now + config.requestLimitMs + config.holdGraceMs,
      });
    } catch {
      throw new SluiceError('balance_unavailable', 'The balance cannot be read right now; try again shortly.');
    }
    if (outcome.admitted) return { ok: true, hold: outcome.hold };
    return { ok: false, error: refusalError(outcome.refusal, limits) };
  }
}

function tooLarge(): SluiceError {
  return new SluiceError('payload_too_large', `The request body is larger than ${MAX_BODY_BYTES} bytes.`);
}

function pausedError(): SluiceError {
  return new SluiceError('paused_by_owner', "The workspace's owner has paused it; requests are refused until the owner lifts the pause.");
}

function rateLimited(perMinute: number, retryAfterSeconds: number): SluiceError {
  return new SluiceError('rate_limit_exceeded', `This key has reached its limit of ${perMinute} requests per minute.`, {
    'Retry-After': String(retryAfterSeconds),
  });
}

/** SPEC's code and message for each admission refusal. */
export function refusalError(refusal: Refusal, limits: AdmissionLimits): SluiceError {
  switch (refusal.kind) {
    case 'insufficient_credit':
      return new SluiceError('insufficient_credit', 'The workspace balance cannot cover this request. Add credit, or send a smaller max_tokens.');
    case 'key_limit_exceeded':
      return new SluiceError(
        'key_limit_exceeded',
        `This key's credit limit of ${formatMinor(refusal.limitMicros)} is reached for its ${limits.keyWindow} window: ` +
          `${formatMinor(refusal.settledMicros)} settled and ${formatMinor(refusal.heldMicros)} held, and this request needs more than the rest.`,
      );
    case 'member_limit_exceeded':
      return new SluiceError('member_limit_exceeded', `The member's monthly spend limit of ${formatMinor(refusal.limitMicros)} is reached for this calendar month.`);
    case 'workspace_limit_exceeded':
      return new SluiceError('workspace_limit_exceeded', `The workspace's monthly spend limit of ${formatMinor(refusal.limitMicros)} is reached for this calendar month.`);
    case 'spend_rate_exceeded':
      return new SluiceError(
        'spend_rate_exceeded',
        `The workspace's spend rate cap of ${formatMinor(refusal.capMicros)} per 60 seconds is reached. Retry, and send max_tokens so each request reserves less.`,
        { 'Retry-After': String(refusal.retryAfterSeconds) },
      );
    case 'rate_limit_exceeded':
      return rateLimited(limits.keyRatePerMinute, refusal.retryAfterSeconds);
  }
}

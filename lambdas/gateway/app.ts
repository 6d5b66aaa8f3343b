/**
 * The gateway's use case, independent of the runtime: a request and a response sink in, SPEC's
 * behaviour out. A request lives through its phases in this order, one file each:
 *
 *   routes (path, method) → authenticate (key, rate) → models (the GET routes) or
 *   admit (DESIGN's order of checks, one transaction) → attempt (each model of the chain) →
 *   relay-body or relay-stream → settle (the charge, one transaction).
 *
 * Each phase returns what happened; the request's telemetry line is built from those values.
 */
import { SluiceError } from '../core/errors';
import { MAX_BODY_BYTES } from '../core/limits';
import { admit, pausedError, refuseReleasing, tooLarge, type Admitted } from './admit';
import { attemptAll, startDeadline } from './attempt';
import { authenticate, countRequest, counted, type Caller } from './authenticate';
import { logFault } from './faults';
import { listModels, readModel } from './models';
import type { GatewayDeps, GatewayRequest, RequestContext, ResponseSink, Served } from './ports';
import { relayBody } from './relay-body';
import { relayStream } from './relay-stream';
import { writeErrorResponse } from './respond';
import { matchRoute, type FamilyRules } from './routes';
import { chargeOf, settle } from './settle';

export type { GatewayDeps, GatewayRequest } from './ports';
export { refusalError } from './refusals';
export { MAX_BODY_BYTES, DEFAULT_SPEND_RATE_CAP_MINOR } from '../core/limits';

/** What the telemetry line knows before any phase has answered. */
interface Known {
  workspaceId?: string;
  keyId?: string;
  model?: string;
}

export class Gateway {
  /** Requests being served (one at a time on on-demand Lambda; many in local mode and on managed instances). */
  private inFlight = 0;

  constructor(private readonly deps: GatewayDeps) {}

  /** Serves one request to completion, settlement included. Never throws. */
  async serve(req: GatewayRequest, sink: ResponseSink): Promise<void> {
    this.inFlight += 1;
    try {
      await this.serveOne(req, sink);
    } finally {
      this.inFlight -= 1;
      if (this.inFlight === 0) this.deps.idle?.();
    }
  }

  private async serveOne(req: GatewayRequest, sink: ResponseSink): Promise<void> {
    const { deps } = this;
    const ctx: RequestContext = { deps, requestId: `req_${deps.newId()}`, traceId: req.traceId, startedAt: deps.clock(), sink };
    const known: Known = {};
    let served: Served;
    try {
      served = await this.handle(ctx, req, known);
    } catch (err) {
      // A refusal is SPEC's answer; anything else is a fault of ours, logged by kind first.
      if (!(err instanceof SluiceError)) logFault(ctx.requestId, 'serve', err);
      served = await writeErrorResponse(sink, ctx.requestId, err).catch(() => ({ status: 500, code: null }));
    }
    deps.telemetry.request({
      requestId: ctx.requestId,
      workspaceId: known.workspaceId,
      keyId: known.keyId,
      model: known.model,
      status: served.status,
      code: served.code ?? undefined,
      servedBy: served.servedBy,
      outcome: served.outcome,
      chargeMicros: served.chargeMicros,
      firstByteMs: served.firstByteMs,
      durationMs: deps.clock() - ctx.startedAt,
    });
  }

  private async handle(ctx: RequestContext, req: GatewayRequest, known: Known): Promise<Served> {
    // A declared length over the ceiling is refused before a byte of the body is looked at.
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > MAX_BODY_BYTES) throw tooLarge();

    const caller = await authenticate(ctx, req.headers.authorization);
    known.workspaceId = caller.workspace.workspaceId;
    known.keyId = caller.key.keyId;

    const matched = matchRoute(req.path);
    if (matched === undefined) throw await counted(ctx, caller, new SluiceError('endpoint_not_supported', `Sluice does not serve ${req.method} ${req.path}.`));
    if (req.method !== matched.allow) {
      throw await counted(ctx, caller, new SluiceError('method_not_allowed', `${req.method} is not allowed on ${req.path}; use ${matched.allow}.`, { Allow: matched.allow }));
    }
    const { route } = matched;
    if (route.kind === 'completion') return complete(ctx, req, route.rules, caller, known);
    // GET requests count against the key's rate here; they hold nothing.
    await countRequest(ctx, caller);
    if (caller.workspace.paused) throw pausedError();
    return route.kind === 'models' ? listModels(ctx, caller) : readModel(ctx, route.id);
  }
}

/** A completion: admitted, attempted, relayed, settled. Settles whatever happens after admission. */
async function complete(ctx: RequestContext, req: GatewayRequest, rules: FamilyRules, caller: Caller, known: Known): Promise<Served> {
  const admission = await admit(ctx, req, rules, caller);
  if ('refused' in admission) {
    known.model = admission.model;
    if (admission.releasing === undefined) throw admission.refused;
    return refuseReleasing(ctx, admission.refused, admission.releasing);
  }
  const { admitted } = admission;
  known.model = admitted.requestedModel;
  const deadline = startDeadline(ctx);
  let replied: Admitted['candidates'][number] | undefined;
  let attempts = 0;
  try {
    const result = await attemptAll(ctx, admitted, deadline.controller.signal);
    attempts = result.attempts;
    if (result.kind === 'failed') {
      const sent = await writeErrorResponse(ctx.sink, ctx.requestId, result.error);
      const outcome = result.timedOut ? 'timeout' : 'provider_error';
      return await settle(ctx, { hold: admitted.hold, counts: undefined, chargeMicros: 0, attempts, status: sent.status, code: sent.code, outcome, stream: false });
    }
    replied = result.candidate;
    const ending = admitted.body.stream === true ? await relayStream(ctx, admitted, result, deadline.controller) : await relayBody(ctx, admitted, result, deadline.controller.signal);
    return await settle(ctx, ending);
  } catch (err) {
    // A fault of our own after admission: logged by kind, answered if nothing was sent, and the
    // hold settled. Once a provider has replied it has billed the prompt at least, so the charge
    // is the estimate, as for a request whose function died: a fault of ours never loses it.
    logFault(ctx.requestId, 'relay', err);
    let sent = { status: 500, code: null as string | null };
    if (!ctx.sink.started) sent = await writeErrorResponse(ctx.sink, ctx.requestId, new SluiceError('internal', 'The server had an error while processing your request.')).catch(() => sent);
    else await ctx.sink.end().catch(() => undefined);
    const chargeMicros = replied === undefined ? 0 : chargeOf(admitted.hold, replied, { kind: 'no_counts', frames: 0 });
    return settle(ctx, { hold: admitted.hold, counts: undefined, chargeMicros, attempts, status: 500, code: sent.code, outcome: 'upstream_fault', stream: false, ...(replied ? { candidate: replied } : {}) });
  } finally {
    deadline.clear();
  }
}

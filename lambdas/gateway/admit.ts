/**
 * Admission of a completion request: DESIGN's order of checks after the door, then one ledger
 * transaction. Nothing is held before the last check passes, and every refusal still counts one
 * request against the key's rate (see `counted`).
 *
 * body to the ceiling (413) and parsed (400) → the model field (400) → `store` on responses (400)
 * → resolution against catalog, profiles and the permitted set (404, 403) → a provider key (503)
 * → the pause (503) → pricing and the ceiling (503, 400) → admission (402 before 429).
 */
import { storeRefusal } from '../core/request-fields';
import { SluiceError } from '../core/errors';
import { candidateSize } from '../core/charge';
import { MAX_BODY_BYTES, DEFAULT_SPEND_RATE_CAP_MINOR } from '../core/limits';
import { windowPlan } from '../core/limit-arming';
import { requestIdTime } from '../core/request-id';
import { parseModelField } from '../core/model-id';
import { MICROS_PER_MINOR, type HoldSize } from '../core/pricing';
import type { HoldRecord, KeyRecord } from '../shared/records';
import { keyRateWindow } from '../core/windows';
import { counted, type Caller } from './authenticate';
import { guarded, logFault } from './faults';
import type { AdmissionLimits, AdmitOutcome, AdmitRequest, GatewayRequest, RequestContext } from './ports';
import { serviceKeyAvailable } from './providers';
import { refusalError } from './refusals';
import { writeErrorResponse } from './respond';
import { resolveModel, type Candidate } from './resolve';
import type { FamilyRules } from './routes';

/** A candidate that can be priced, with the hold it alone would need (none on the workspace's own key). */
export interface PricedCandidate extends Candidate {
  readonly size?: HoldSize;
}

/** An admitted request: its hold, its parsed body, and the models it may be served by, in order. */
export interface Admitted {
  readonly hold: HoldRecord;
  readonly limits: AdmissionLimits;
  readonly rules: FamilyRules;
  /** The body as the client sent it, and parsed. */
  readonly text: string;
  readonly body: Readonly<Record<string, unknown>>;
  readonly requestedModel: string;
  /** The caller named a route (a profile or `sluice/auto`), not one model. */
  readonly route: boolean;
  readonly candidates: readonly PricedCandidate[];
}

/** SPEC's 413. */
export function tooLarge(): SluiceError {
  return new SluiceError('payload_too_large', `The request body is larger than ${MAX_BODY_BYTES} bytes.`);
}

/** SPEC's 503 for a paused workspace. */
export function pausedError(): SluiceError {
  return new SluiceError('paused_by_owner', "The workspace's owner has paused it; requests are refused until the owner lifts the pause.");
}

/**
 * How admission ended: admitted, or refused with SPEC's answer (and the model named, once the field
 * was read). A refusal after an admission that failed without an answer carries the release of
 * whatever that admission may have written (`releasing`, which never rejects).
 */
export type Admission = { readonly admitted: Admitted } | { readonly refused: SluiceError; readonly model?: string; readonly releasing?: Promise<void> };

/** How long the answer waits for the release: a store that answers does it in milliseconds; one that does not is not waited for. */
const RELEASE_BEFORE_ANSWER_MS = 1_000;
/** The longest pause between two releases while the store does not answer. */
const RELEASE_PAUSE_MAX_MS = 5_000;

const balanceUnavailable = (): SluiceError => new SluiceError('balance_unavailable', 'The balance cannot be read right now; try again shortly.');

/** Runs the checks and the admission. A fault that is not a refusal is thrown. */
export async function admit(ctx: RequestContext, req: GatewayRequest, rules: FamilyRules, caller: Caller): Promise<Admission> {
  const { deps } = ctx;
  const now = deps.clock();
  const named: { model?: string } = {};
  let checked: Checked;
  try {
    checked = await check(ctx, req, rules, caller, named);
  } catch (err) {
    if (!(err instanceof SluiceError)) throw err;
    return { refused: await counted(ctx, caller, err), ...named };
  }
  const refused = (error: SluiceError): Admission => ({ refused: error, model: checked.requestedModel });
  // A fault reading the limits or admitting is the store's, not the request's: it is not counted.
  let limits: AdmissionLimits;
  try {
    limits = await limitsFor(ctx, caller, now);
  } catch (err) {
    if (err instanceof SluiceError) return refused(err);
    throw err;
  }
  let outcome: AdmitOutcome;
  try {
    outcome = await deps.ledger.admit(admitRequest(ctx, caller, rules, checked, limits, now));
  } catch (err) {
    if (err instanceof SluiceError) return refused(err);
    // The transaction may have been written although no answer came (a lost reply, a timeout):
    // the request is refused, so whatever it may hold is given back (rule: nothing is held or
    // charged for a refusal), and can hold nothing later.
    logFault(ctx.requestId, 'admit', err);
    return { ...refused(balanceUnavailable()), releasing: releaseAdmission(ctx, caller.workspace.workspaceId) };
  }
  // Money still in transit between regions is the store's wait, not the request's: not counted either.
  if (!outcome.admitted) return refused(outcome.refusal.kind === 'in_transit' ? refusalError(outcome.refusal, limits) : await counted(ctx, caller, refusalError(outcome.refusal, limits)));
  const { text, body, requestedModel, route, candidates } = checked;
  return { admitted: { hold: outcome.hold, limits, rules, text, body, requestedModel, route, candidates } };
}

/**
 * Releases what a failed admission may have written, trying again while the store does not answer,
 * up to the end of the request's own time budget (its deadline, SPEC's 540 s from its start). What
 * is still not released then is the sweeper's, after the row's expiry; the sweeper charges a row
 * only what a gateway recorded on it, so this one nothing (`lambdas/sweeper/sweep.ts`).
 */
async function releaseAdmission(ctx: RequestContext, workspaceId: string): Promise<void> {
  const { deps } = ctx;
  const until = ctx.startedAt + deps.config.requestLimitMs;
  for (let attempt = 0; ; attempt += 1) {
    try {
      await deps.ledger.release(workspaceId, ctx.requestId, deps.clock());
      return;
    } catch (err) {
      const wait = Math.min(RELEASE_PAUSE_MAX_MS, 100 * 2 ** attempt);
      // A RangeError is the request's own (an id without its start): trying again cannot help.
      if (err instanceof RangeError || deps.clock() + wait >= until) {
        logFault(ctx.requestId, 'release', err);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/**
 * Answers a refusal that carries a release: after the release when the store does it at once,
 * else at once, the release going on after the answer (as a settlement does after a reply).
 */
export async function refuseReleasing(ctx: RequestContext, refused: SluiceError, releasing: Promise<void>): Promise<{ status: number; code: string | null }> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), RELEASE_BEFORE_ANSWER_MS);
  });
  const done = await Promise.race([releasing.then(() => true), waited]);
  clearTimeout(timer);
  const sent = await writeErrorResponse(ctx.sink, ctx.requestId, refused).catch(() => ({ status: 500, code: null }));
  if (!done) await releasing;
  return sent;
}

/** The ledger's admission: the dearest candidate's hold under every limit of the caller. */
function admitRequest(ctx: RequestContext, caller: Caller, rules: FamilyRules, checked: Checked, limits: AdmissionLimits, now: number): AdmitRequest {
  const { largest } = checked;
  return {
    holdId: ctx.requestId,
    workspaceId: caller.workspace.workspaceId,
    keyId: caller.key.keyId,
    memberId: caller.key.memberId,
    family: rules.family,
    requestedModel: checked.requestedModel,
    amountMicros: largest?.amountMicros ?? 0,
    inputMicros: largest?.inputMicros ?? 0,
    // Only a chain served wholly on the workspace's own keys holds nothing.
    byok: largest === undefined,
    limits,
    now,
    expiresAt: now + ctx.deps.config.requestLimitMs + ctx.deps.config.holdGraceMs,
  };
}

interface Checked {
  readonly text: string;
  readonly body: Readonly<Record<string, unknown>>;
  readonly requestedModel: string;
  readonly route: boolean;
  readonly candidates: readonly PricedCandidate[];
  /** The most expensive candidate's hold; undefined when every candidate runs on the workspace's own key. */
  readonly largest: HoldSize | undefined;
}

/** Every check before the ledger, in DESIGN's order. */
async function check(ctx: RequestContext, req: GatewayRequest, rules: FamilyRules, caller: Caller, named: { model?: string }): Promise<Checked> {
  const { deps } = ctx;
  if (req.body.length > MAX_BODY_BYTES) throw tooLarge();
  const text = req.body.toString('utf8');
  const body = parseBody(text);

  const ref = parseModelField(body.model);
  named.model = ref.id;
  const storeError = storeRefusal(rules.refusesStore, body);
  if (storeError !== undefined) throw storeError;

  const resolution = await guarded(
    ctx.requestId,
    'resolve',
    () => resolveModel(ctx.requestId, ref, rules, caller.workspace, deps.catalog, deps.workspaces),
    () => new SluiceError('model_pricing_unreadable', 'The model catalog cannot be read right now.'),
  );
  const keyed: Candidate[] = [];
  for (const c of resolution.candidates) {
    if (c.byokSecret !== undefined || (await serviceKeyAvailable(c.provider, deps))) keyed.push(c);
  }
  if (keyed.length === 0) {
    throw new SluiceError('no_provider_configured', `No provider key is configured for ${resolution.candidates.map((c) => c.provider.name).join(', ')}.`);
  }

  if (caller.workspace.paused) throw pausedError();

  // A route drops a member it cannot price (no maximum output and no ceiling sent, a prompt too
  // large for its window) and is refused only when no member is left; the hold covers the most
  // expensive member that remains. Each keeps its own size for its estimate and its stream.
  const candidates: PricedCandidate[] = [];
  let largest: HoldSize | undefined;
  let unpriced: SluiceError | undefined;
  for (const c of keyed) {
    if (c.byokSecret !== undefined) {
      candidates.push(c);
      continue;
    }
    try {
      const size = candidateSize(c.model, body, req.body.length, rules.family);
      if (largest === undefined || size.amountMicros > largest.amountMicros) largest = size;
      candidates.push({ ...c, size });
    } catch (err) {
      if (!(err instanceof SluiceError)) throw err;
      unpriced ??= err;
    }
  }
  if (candidates.length === 0) throw unpriced ?? new SluiceError('model_not_priceable', 'No model of this route can be priced right now.');
  return { text, body, requestedModel: ref.id, route: resolution.route, candidates, largest };
}

function parseBody(text: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new SluiceError('invalid_json', 'The request body is not valid JSON.');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new SluiceError('invalid_body', 'The request body must be a JSON object.');
  return parsed as Record<string, unknown>;
}

/** The caller's limits at `now`, the admission's own time (which also decides whether a window being armed is counted). */
async function limitsFor(ctx: RequestContext, caller: Caller, now: number): Promise<AdmissionLimits> {
  const { key, workspace } = caller;
  const memberId = key.memberId;
  const member =
    memberId === undefined
      ? undefined
      : await guarded(
          ctx.requestId,
          'limits',
          () => ctx.deps.workspaces.member(workspace.workspaceId, memberId),
          () => new SluiceError('balance_unavailable', 'The member limits cannot be read right now; try again shortly.'),
        );
  // A key window or member month is written only while its limit is tracked (`core/limit-arming.ts`),
  // decided at the request's start as its id (and its row) records it.
  const keyWindow = key.creditWindow ?? 'monthly';
  const start = requestIdTime(ctx.requestId) ?? now;
  const keyPlan = windowPlan({ limitMicros: key.creditLimitMicros, trackFrom: key.creditTrackFrom, armedFrom: key.creditArmedFrom }, keyWindow, start);
  const memberPlan = windowPlan({ limitMicros: member?.monthlyLimitMicros, trackFrom: member?.monthlyTrackFrom, armedFrom: member?.monthlyArmedFrom }, 'monthly', start);
  return {
    keyWindow,
    ...(keyPlan.track ? { keyLimitMicros: keyPlan.limitMicros, ...(keyPlan.arming ? { keyLimitArming: true } : {}), ...(keyPlan.generation !== undefined ? { keyWindowGeneration: keyPlan.generation } : {}) } : {}),
    ...(memberPlan.track
      ? { memberLimitMicros: memberPlan.limitMicros, ...(memberPlan.arming ? { memberLimitArming: true } : {}), ...(memberPlan.generation !== undefined ? { memberMonthGeneration: memberPlan.generation } : {}) }
      : {}),
    workspaceLimitMicros: workspace.monthlyLimitMicros,
    spendRateCapMicros: (workspace.spendRateCapMinor ?? DEFAULT_SPEND_RATE_CAP_MINOR) * MICROS_PER_MINOR,
    keyRatePerMinute: ctx.deps.config.keyRatePerMinute,
    ...rateWindowOf(key, start),
  };
}

/** Where the key's requests of the minute of `start` are counted, when on a key window. */
function rateWindowOf(key: KeyRecord, start: number): { keyRateWindow?: string } {
  const sk = keyRateWindow(key.keyId, key, start);
  return sk === undefined ? {} : { keyRateWindow: sk };
}

/**
 * Workspace settings: creation, the ledger view, the pause, the monthly limit, the spend rate
 * cap, the permitted-model set and the default route.
 */
import { DEFAULT_SPEND_RATE_CAP_MINOR } from '../core/limits';
import { formatMoney, MICROS_PER_MINOR } from '../core/money-format';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { monthId } from '../core/windows';
import type { BalanceRecord, MemberRecord, WorkspaceRecord } from '../shared/records';
import { readBalanceEverywhere } from './regions-balance';
import type { AdminContext } from './directory-context';
import {
  BALANCE,
  META,
  failedAt,
  ledgerPk,
  memberSk,
  newId,
  nowOf,
  profileSk,
  table,
  transact,
} from './directory-context';
import { ConcurrentUpdateError, ProfileNotFoundError, SpendCapError, ValidationError, WorkspaceNotFoundError } from './directory-errors';
import { checkEmail, checkLabel, checkProfileIdentifier, formatMicros, minorToMicros, parsePinnedId } from './directory-validate';
import { checkWorkspaceId, listMemberRecords, listProfileRecords, requireWorkspace, updateMeta } from './directory-common';
import { requireCatalogued } from './directory-catalog';

/** SPEC: the spend rate cap a workspace starts with, minor units per rolling 60 s. */
export const SPEND_CAP_DEFAULT_MINOR = DEFAULT_SPEND_RATE_CAP_MINOR;
/** SPEC: the lowest spend rate cap an owner may set. */
export const SPEND_CAP_MIN_MINOR = 100;
/**
 * Sluice's highest self-set spend rate cap (SPEC leaves the figure to us). Above it the operator
 * passes `force`, standing for "the customer asked the service".
 */
export const SPEND_CAP_CEILING_MINOR = 1_000_000;

/** Creates a workspace with its owner and an empty balance, all in one transaction. */
export async function createWorkspace(
  ctx: AdminContext,
  input: { name: string; ownerEmail?: string },
): Promise<{ workspaceId: string; ownerMemberId: string }> {
  const name = checkLabel(input.name, 'workspace name');
  const email = input.ownerEmail === undefined ? undefined : checkEmail(input.ownerEmail);
  const workspaceId = newId('ws');
  const ownerMemberId = newId('mem');
  const meta: WorkspaceRecord = {
    pk: workspaceId,
    sk: META,
    workspaceId,
    name,
    createdAt: nowOf(ctx),
    paused: false,
    spendRateCapMinor: SPEND_CAP_DEFAULT_MINOR,
    keySlots: 0,
  };
  const owner: MemberRecord = {
    pk: workspaceId,
    sk: memberSk(ownerMemberId),
    workspaceId,
    memberId: ownerMemberId,
    role: 'owner',
    ...(email === undefined ? {} : { email }),
  };
  const balance: BalanceRecord = {
    pk: ledgerPk(workspaceId),
    sk: BALANCE,
    availableMicros: 0,
    heldMicros: 0,
    spentMicros: 0,
    creditedMicros: 0,
  };
  // The conditions only guard against an id collision; they make a retry of this call safe too.
  await transact(
    ctx,
    [
      { Put: { TableName: table(ctx, 'workspaces'), Item: meta, ConditionExpression: 'attribute_not_exists(pk)' } },
      { Put: { TableName: table(ctx, 'workspaces'), Item: owner, ConditionExpression: 'attribute_not_exists(pk)' } },
      { Put: { TableName: table(ctx, 'ledger'), Item: balance, ConditionExpression: 'attribute_not_exists(pk)' } },
    ],
    () => new Error(`generated workspace id ${workspaceId} collided; try again`),
  );
  return { workspaceId, ownerMemberId };
}

/** One amount of the ledger view, exact in micro-units and readable in minor units. */
export interface MoneyView {
  readonly micros: number;
  /** Minor units with six decimals, e.g. `"12.500000"`. */
  readonly minor: string;
}

function money(micros: number): MoneyView {
  return { micros, minor: formatMicros(micros) };
}

/** The settings and ledger of one workspace, as `showWorkspace` returns them. */
export interface WorkspaceView {
  readonly workspaceId: string;
  readonly name: string;
  readonly createdAt: string;
  readonly paused: boolean;
  readonly spendRateCapMinor: number;
  readonly monthlyLimit: MoneyView | null;
  /** null: unrestricted. */
  readonly permittedModels: readonly string[] | null;
  readonly defaultProfile: string | null;
  readonly byokProviders: readonly string[];
  readonly keySlots: number;
  /** Below this available balance the low-credit notice fires; null for none. */
  readonly lowCreditThreshold: MoneyView | null;
  readonly balance: {
    readonly available: MoneyView;
    readonly held: MoneyView;
    readonly spent: MoneyView;
    readonly credited: MoneyView;
  };
  /** The current UTC calendar month's window of the workspace monthly limit. */
  readonly month: { readonly id: string; readonly settled: MoneyView; readonly held: MoneyView };
  /**
   * In a stage with several regions, each region's part of the balance (its own slices, read in
   * this region's replica): what a region that is down holds is stranded there until it returns.
   * null in a stage with one region.
   */
  readonly regions: readonly { readonly region: string; readonly available: MoneyView; readonly held: MoneyView }[] | null;
  /**
   * In a stage with several regions, credit sent by one region and not yet credited by another
   * (a top-up's spread, a transfer): in `balance.available`, in no region's part. null in a stage
   * with one region.
   */
  readonly inTransit: MoneyView | null;
  readonly members: readonly {
    readonly memberId: string;
    readonly role: 'owner' | 'member';
    readonly email: string | null;
    readonly monthlyLimit: MoneyView | null;
  }[];
  readonly profiles: readonly { readonly identifier: string; readonly models: readonly string[] }[];
}

/** Reads a workspace's settings, members, profiles, balance and current month. */
export async function showWorkspace(
  ctx: AdminContext,
  input: {
    workspaceId: string;
  },
): Promise<WorkspaceView> {
  const ws = await requireWorkspace(ctx, input.workspaceId);
  const now = nowOf(ctx);
  const month = monthId(now);
  const [members, profiles, summary] = await Promise.all([
    listMemberRecords(ctx, ws.workspaceId),
    listProfileRecords(ctx, ws.workspaceId),
    // The ledger may be split into slices: the store sums them from one consistent read.
    readBalanceEverywhere(ctx.doc, { ledger: table(ctx, 'ledger'), usage: table(ctx, 'usage') }, ctx.regions, ws.workspaceId, now),
  ]);
  const balance = summary;
  const window = summary.month;
  return {
    workspaceId: ws.workspaceId,
    name: ws.name,
    createdAt: new Date(ws.createdAt).toISOString(),
    paused: ws.paused,
    spendRateCapMinor: ws.spendRateCapMinor ?? SPEND_CAP_DEFAULT_MINOR,
    monthlyLimit: ws.monthlyLimitMicros === undefined ? null : money(ws.monthlyLimitMicros),
    permittedModels: ws.permittedModels === undefined ? null : [...ws.permittedModels],
    defaultProfile: ws.defaultProfile ?? null,
    byokProviders: Object.keys(ws.byok ?? {}).sort(),
    keySlots: ws.keySlots ?? 0,
    lowCreditThreshold: ws.lowCreditThresholdMicros === undefined ? null : money(ws.lowCreditThresholdMicros),
    balance: {
      available: money(balance?.availableMicros ?? 0),
      held: money(balance?.heldMicros ?? 0),
      spent: money(balance?.spentMicros ?? 0),
      credited: money(balance?.creditedMicros ?? 0),
    },
    month: { id: month, settled: money(window?.settledMicros ?? 0), held: money(window?.heldMicros ?? 0) },
    regions: summary.regions === undefined ? null : summary.regions.map((r) => ({ region: r.region, available: money(r.availableMicros), held: money(r.heldMicros) })),
    inTransit: summary.inTransitMicros === undefined ? null : money(summary.inTransitMicros),
    members: members
      .map((m) => ({
        memberId: m.memberId,
        role: m.role,
        email: m.email ?? null,
        monthlyLimit: m.monthlyLimitMicros === undefined ? null : money(m.monthlyLimitMicros),
      }))
      // Owner first, then by id, so the listing is stable between runs.
      .sort((a, b) => (a.role === b.role ? a.memberId.localeCompare(b.memberId) : a.role === 'owner' ? -1 : 1)),
    profiles: profiles.map((p) => ({ identifier: p.identifier, models: [...p.models] })),
  };
}

/** Pauses or resumes serving. Keys are untouched either way (SPEC: a pause never ends a key). */
export async function setPaused(ctx: AdminContext, input: { workspaceId: string; paused: boolean }): Promise<{ paused: boolean }> {
  await updateMeta(ctx, input.workspaceId, { expression: 'SET paused = :p', values: { ':p': input.paused } });
  return { paused: input.paused };
}

/** Sets the workspace monthly spend limit in minor units, or removes it (null). */
export async function setWorkspaceMonthlyLimit(
  ctx: AdminContext,
  input: { workspaceId: string; limitMinor: number | null },
): Promise<{ monthlyLimitMicros: number | null }> {
  if (input.limitMinor === null) {
    await updateMeta(ctx, input.workspaceId, { expression: 'REMOVE monthlyLimitMicros' });
    return { monthlyLimitMicros: null };
  }
  const micros = minorToMicros(input.limitMinor, 'monthly limit', { allowZero: true });
  await updateMeta(ctx, input.workspaceId, { expression: 'SET monthlyLimitMicros = :m', values: { ':m': micros } });
  return { monthlyLimitMicros: micros };
}

/**
 * Sets the spend rate cap (minor units per rolling 60 s). SPEC: 0 is refused (pausing is the way
 * to stop), the minimum is 100, above the self-set ceiling the customer must ask the service
 * (`force`), and lowering always works, even from a figure above the ceiling.
 */
export async function setSpendRateCap(
  ctx: AdminContext,
  input: { workspaceId: string; capMinor: number; force?: boolean },
): Promise<{ spendRateCapMinor: number; previousMinor: number }> {
  const cap = input.capMinor;
  if (!Number.isSafeInteger(cap) || cap < 0) {
    throw new ValidationError(`spend rate cap must be a whole number of minor units, got ${String(cap)}`);
  }
  if (cap === 0) {
    throw new SpendCapError('a spend rate cap of 0 is refused: pause the workspace to stop all requests (sluice workspace pause)');
  }
  if (cap < SPEND_CAP_MIN_MINOR) {
    throw new SpendCapError(`the spend rate cap is at least ${formatMoney(SPEND_CAP_MIN_MINOR * MICROS_PER_MINOR)} per 60 seconds, got ${formatMoney(cap * MICROS_PER_MINOR)}`);
  }
  const aboveCeiling = cap > SPEND_CAP_CEILING_MINOR && input.force !== true;
  const old = await updateMeta(
    ctx,
    input.workspaceId,
    {
      expression: 'SET spendRateCapMinor = :cap',
      values: { ':cap': cap },
      // Above the ceiling without force, only a lowering passes; deciding it in the condition
      // keeps the check and the write atomic.
      ...(aboveCeiling ? { condition: 'spendRateCapMinor > :cap' } : {}),
    },
    () =>
      new SpendCapError(
        `${formatMoney(cap * MICROS_PER_MINOR)} is above the self-set ceiling of ${formatMoney(SPEND_CAP_CEILING_MINOR * MICROS_PER_MINOR)} per 60 seconds; ` +
          'the customer must ask the service (pass --force); lowering from a higher figure always works',
      ),
  );
  return { spendRateCapMinor: cap, previousMinor: old.spendRateCapMinor ?? SPEND_CAP_DEFAULT_MINOR };
}

/**
 * Sets the permitted-model set (exact pinned ids) or removes the restriction (null). An empty set
 * is refused: it would refuse every request, and pausing says that more plainly.
 */
export async function setPermittedModels(
  ctx: AdminContext,
  input: { workspaceId: string; models: readonly string[] | null },
): Promise<{ permittedModels: readonly string[] | null }> {
  if (input.models === null) {
    await updateMeta(ctx, input.workspaceId, { expression: 'REMOVE permittedModels' });
    return { permittedModels: null };
  }
  if (input.models.length === 0) {
    throw new ValidationError('an empty permitted set would refuse every model: pause the workspace instead, or clear the set to lift the restriction');
  }
  const models = [...new Set(input.models)];
  for (const id of models) parsePinnedId(id, 'permitted model');
  await requireCatalogued(ctx, models);
  await updateMeta(ctx, input.workspaceId, { expression: 'SET permittedModels = :m', values: { ':m': models } });
  return { permittedModels: models };
}

/** Designates a routing profile as the default route (`sluice/auto`), or clears it (null). */
export async function setDefaultProfile(
  ctx: AdminContext,
  input: { workspaceId: string; identifier: string | null },
): Promise<{ defaultProfile: string | null }> {
  if (input.identifier === null) {
    await updateMeta(ctx, input.workspaceId, { expression: 'REMOVE defaultProfile' });
    return { defaultProfile: null };
  }
  checkWorkspaceId(input.workspaceId);
  const identifier = checkProfileIdentifier(input.identifier);
  // The profile must exist at the instant the default points at it: check and set together.
  await transact(
    ctx,
    [
      {
        ConditionCheck: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: input.workspaceId, sk: profileSk(identifier) },
          ConditionExpression: 'attribute_exists(pk)',
        },
      },
      {
        Update: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: input.workspaceId, sk: META },
          UpdateExpression: 'SET defaultProfile = :id',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: { ':id': identifier },
        },
      },
    ],
    (reasons) => {
      if (failedAt(reasons, 1)) return new WorkspaceNotFoundError(input.workspaceId);
      if (failedAt(reasons, 0)) return new ProfileNotFoundError(input.workspaceId, identifier);
      return undefined;
    },
  );
  return { defaultProfile: identifier };
}

/** One workspace in a listing. */
export interface WorkspaceSummary {
  readonly workspaceId: string;
  readonly name: string;
  readonly paused: boolean;
  readonly createdAt: string;
}

/**
 * Every workspace, by name. A scan of the settings items: an operator's listing, run at human
 * rates, over a table that holds a few items per workspace.
 */
export async function listWorkspaces(ctx: AdminContext): Promise<WorkspaceSummary[]> {
  const found: WorkspaceSummary[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ctx.doc.send(
      new ScanCommand({
        TableName: table(ctx, 'workspaces'),
        FilterExpression: 'sk = :meta',
        ExpressionAttributeValues: { ':meta': META },
        ConsistentRead: true,
        ExclusiveStartKey: start,
      }),
    );
    for (const ws of (out.Items ?? []) as WorkspaceRecord[]) {
      found.push({ workspaceId: ws.workspaceId, name: ws.name, paused: ws.paused, createdAt: new Date(ws.createdAt).toISOString() });
    }
    start = out.LastEvaluatedKey;
  } while (start !== undefined);
  return found.sort((a, b) => a.name.localeCompare(b.name) || a.workspaceId.localeCompare(b.workspaceId));
}

/** Sets the low-credit threshold in micro-units (the notifier reads it), or removes it (null). */
export async function setLowCreditThreshold(
  ctx: AdminContext,
  input: { workspaceId: string; thresholdMicros: number | null },
): Promise<{ lowCreditThresholdMicros: number | null }> {
  if (input.thresholdMicros === null) {
    await updateMeta(ctx, input.workspaceId, { expression: 'REMOVE lowCreditThresholdMicros' });
    return { lowCreditThresholdMicros: null };
  }
  if (!Number.isSafeInteger(input.thresholdMicros) || input.thresholdMicros <= 0) {
    throw new ValidationError('a low-credit threshold is a positive amount; clear it to stop the notice');
  }
  await updateMeta(ctx, input.workspaceId, { expression: 'SET lowCreditThresholdMicros = :t', values: { ':t': input.thresholdMicros } });
  return { lowCreditThresholdMicros: input.thresholdMicros };
}

const PERMIT_ATTEMPTS = 5;

/**
 * Adds ids to, or removes ids from, the permitted set. Added ids must be catalogued; removing
 * from an unrestricted workspace, or removing the last id, is refused (the first would need the
 * whole catalog listed, the second would refuse every model). The write is conditional on the
 * set read, so two operators editing at once never lose each other's change.
 */
export async function changePermittedModels(
  ctx: AdminContext,
  input: { workspaceId: string; add?: readonly string[]; remove?: readonly string[] },
): Promise<{ permittedModels: readonly string[]; added: readonly string[]; removed: readonly string[] }> {
  const add = [...new Set(input.add ?? [])];
  const remove = [...new Set(input.remove ?? [])];
  if (add.length === 0 && remove.length === 0) throw new ValidationError('name at least one provider/model id');
  for (const id of [...add, ...remove]) parsePinnedId(id, 'permitted model');
  if (add.length > 0) await requireCatalogued(ctx, add);
  for (let attempt = 1; attempt <= PERMIT_ATTEMPTS; attempt++) {
    const ws = await requireWorkspace(ctx, input.workspaceId);
    const current = ws.permittedModels === undefined ? undefined : [...ws.permittedModels];
    if (current === undefined && remove.length > 0) {
      throw new ValidationError('the workspace is unrestricted (every model permitted): add the ids it may use instead');
    }
    const next = [...(current ?? [])];
    const added = add.filter((id) => !next.includes(id));
    next.push(...added);
    const removed = remove.filter((id) => next.includes(id));
    const kept = next.filter((id) => !removed.includes(id));
    if (kept.length === 0) {
      throw new ValidationError('that would leave no permitted model and refuse every request: pause the workspace instead, or clear the set');
    }
    try {
      await updateMeta(
        ctx,
        input.workspaceId,
        current === undefined
          ? { expression: 'SET permittedModels = :m', values: { ':m': kept }, condition: 'attribute_not_exists(permittedModels)' }
          : { expression: 'SET permittedModels = :m', values: { ':m': kept, ':old': current }, condition: 'permittedModels = :old' },
        () => new PermittedSetMovedError(),
      );
      return { permittedModels: kept, added, removed };
    } catch (err) {
      if (!(err instanceof PermittedSetMovedError)) throw err;
    }
  }
  throw new ConcurrentUpdateError(`the permitted set of workspace ${input.workspaceId}`);
}

/** Raised inside a round when the permitted set changed between the read and the write. */
class PermittedSetMovedError extends Error {}

/**
 * Members: adding one, their monthly spend limit, and removing them with or without revoking
 * the keys minted for them.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { armingMarksLive, needsArming, trackFromFor } from '../core/limit-arming';
import type { MemberRecord } from '../shared/records';
import type { AdminContext, TransactItem } from './directory-context';
import { META, conditional, failedAt, memberSk, newId, nowOf, table, transact } from './directory-context';
import { ConcurrentUpdateError, MemberNotFoundError, OwnerRemovalError, ValidationError, WorkspaceNotFoundError } from './directory-errors';
import { checkEmail, minorToMicros } from './directory-validate';
import { checkWorkspaceId, getWorkspace, listMemberRecords } from './directory-common';
import { queryKeyRecords } from './directory-keys';
import { DEFAULT_CACHE_TTL_MS, armWindow, reopenCounters } from './limit-arming';
import { requireHomeRegionItems, runsElsewhere } from './config-home';

/** Adds a (non-owner) member. An e-mail already in the workspace is refused. */
export async function addMember(ctx: AdminContext, input: { workspaceId: string; email?: string }): Promise<{ memberId: string }> {
  checkWorkspaceId(input.workspaceId);
  const email = input.email === undefined ? undefined : checkEmail(input.email);
  if (email !== undefined) {
    // Best effort only (no unique index on e-mail): it catches the operator's double paste.
    const members = await listMemberRecords(ctx, input.workspaceId);
    if (members.some((m) => m.email?.toLowerCase() === email.toLowerCase())) {
      throw new ValidationError(`${email} is already a member of workspace ${input.workspaceId}`);
    }
  }
  const memberId = newId('mem');
  const member: MemberRecord = {
    pk: input.workspaceId,
    sk: memberSk(memberId),
    workspaceId: input.workspaceId,
    memberId,
    role: 'member',
    ...(email === undefined ? {} : { email }),
  };
  await transact(
    ctx,
    [
      {
        ConditionCheck: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: input.workspaceId, sk: META },
          ConditionExpression: 'attribute_exists(pk)',
        },
      },
      { Put: { TableName: table(ctx, 'workspaces'), Item: member, ConditionExpression: 'attribute_not_exists(pk)' } },
    ],
    (reasons) => (failedAt(reasons, 0) ? new WorkspaceNotFoundError(input.workspaceId) : undefined),
  );
  return { memberId };
}

/**
 * Sets a member's monthly spend limit in minor units, or removes it (null). A member's month is
 * written only while a limit is set: one set where none was is armed before this returns, as a
 * key's credit limit is (see `setKeyCreditLimit`).
 */
export async function setMemberMonthlyLimit(
  ctx: AdminContext,
  input: { workspaceId: string; memberId: string; limitMinor: number | null },
): Promise<{ memberId: string; monthlyLimitMicros: number | null }> {
  checkWorkspaceId(input.workspaceId);
  const micros = input.limitMinor === null ? null : minorToMicros(input.limitMinor, 'member monthly limit', { allowZero: true });
  const got = await ctx.doc.send(new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: input.workspaceId, sk: memberSk(input.memberId) }, ConsistentRead: true }));
  const member = got.Item as MemberRecord | undefined;
  if (member === undefined) throw new MemberNotFoundError(input.workspaceId, input.memberId);
  const arm = micros !== null && needsArming({ limitMicros: member.monthlyLimitMicros }, 'monthly');
  // An arming that did not finish (a call that stopped part way) is finished by setting the limit again.
  const resume = micros !== null && !arm && member.monthlyTrackFrom !== undefined && member.monthlyArmedFrom !== member.monthlyTrackFrom;
  const trackFrom = arm ? trackFromFor(nowOf(ctx), ctx.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS) : member.monthlyTrackFrom;
  // Removed: the earlier arming's marks come off (outside the home region only while they can
  // still refuse: after that, taking them off changes nothing).
  const reopen = micros === null && member.monthlyTrackFrom !== undefined && (!runsElsewhere(ctx) || armingMarksLive(member.monthlyTrackFrom, nowOf(ctx)));
  // Arming writes the home region's member month (and taking marks off, its counters): refused before anything is written while the configuration home is elsewhere.
  if (arm || resume || reopen) requireHomeRegionItems(ctx, arm || resume ? "a member's monthly limit set where none was tracked (it is armed)" : "removing a member's monthly limit armed moments ago");
  await conditional(
    () =>
      ctx.doc.send(
        new UpdateCommand({
          TableName: table(ctx, 'workspaces'),
          Key: { pk: input.workspaceId, sk: memberSk(input.memberId) },
          UpdateExpression:
            micros === null
              ? 'REMOVE monthlyLimitMicros, monthlyTrackFrom, monthlyArmedFrom'
              : arm
                ? 'SET monthlyLimitMicros = :m, monthlyTrackFrom = :t REMOVE monthlyArmedFrom'
                : 'SET monthlyLimitMicros = :m',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: micros === null ? undefined : { ':m': micros, ...(arm ? { ':t': trackFrom } : {}) },
        }),
      ),
    () => new MemberNotFoundError(input.workspaceId, input.memberId),
  );
  if ((arm || resume) && trackFrom !== undefined) await armWindow(ctx, { kind: 'member', workspaceId: input.workspaceId, memberId: input.memberId, generation: trackFrom });
  // Removed: the earlier arming's marks must not refuse requests that count nothing now.
  if (reopen && member.monthlyTrackFrom !== undefined) {
    await reopenCounters(ctx, { kind: 'member', workspaceId: input.workspaceId, memberId: input.memberId, generation: member.monthlyTrackFrom });
  }
  return { memberId: input.memberId, monthlyLimitMicros: micros };
}

/** Raised inside a round when a key changed between the read and the transaction. */
class KeysMovedError extends Error {}

const MAX_ROUNDS = 6;

/**
 * Removes a member. With `revokeKeys`, every key minted for them ends (revokedAt set) and its slot
 * frees, in the same transaction as the removal. Without it, their keys stay live (a key belongs
 * to the workspace, not to a person) and lose the member reference, so no limit counts against a
 * member who no longer exists. A key minted for the member while this runs is caught by a
 * re-read after the removal and treated the same way.
 */
export async function removeMember(
  ctx: AdminContext,
  input: { workspaceId: string; memberId: string; revokeKeys: boolean; by?: string },
): Promise<{ memberId: string; revokedKeyIds: string[]; keptKeyIds: string[] }> {
  checkWorkspaceId(input.workspaceId);
  const { workspaceId, memberId } = input;
  const got = await ctx.doc.send(
    new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: workspaceId, sk: memberSk(memberId) }, ConsistentRead: true }),
  );
  const member = got.Item as MemberRecord | undefined;
  if (member === undefined) throw new MemberNotFoundError(workspaceId, memberId);
  if (member.role === 'owner') throw new OwnerRemovalError(memberId);

  const revokedKeyIds: string[] = [];
  const keptKeyIds: string[] = [];
  let memberRemoved = false;
  for (let round = 1; round <= MAX_ROUNDS; round++) {
    const keys = (await queryKeyRecords(ctx, workspaceId)).filter((k) => k.memberId === memberId && k.revokedAt === undefined);
    if (memberRemoved && keys.length === 0) return { memberId, revokedKeyIds, keptKeyIds };
    const now = nowOf(ctx);
    const items: TransactItem[] = [];
    if (!memberRemoved) {
      items.push({
        Delete: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: workspaceId, sk: memberSk(memberId) },
          ConditionExpression: 'attribute_exists(pk) AND #role <> :owner',
          ExpressionAttributeNames: { '#role': 'role' },
          ExpressionAttributeValues: { ':owner': 'owner' },
        },
      });
    }
    for (const k of keys) {
      items.push({
        Update: {
          TableName: table(ctx, 'keys'),
          Key: { keyHash: k.keyHash },
          // An ended key keeps how and by whom, like a revoked one (the console lists ended keys).
          UpdateExpression: input.revokeKeys ? `SET revokedAt = :now, endedHow = :how${input.by === undefined ? '' : ', endedBy = :by'}` : 'REMOVE memberId',
          ConditionExpression: 'attribute_exists(keyHash) AND attribute_not_exists(revokedAt) AND memberId = :m',
          ExpressionAttributeValues: input.revokeKeys
            ? { ':now': now, ':m': memberId, ':how': 'member-removed', ...(input.by === undefined ? {} : { ':by': input.by }) }
            : { ':m': memberId },
        },
      });
    }
    if (input.revokeKeys && keys.length > 0) {
      items.push({
        Update: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: workspaceId, sk: META },
          UpdateExpression: 'SET keySlots = keySlots - :n',
          // Slots never go negative: each ended key gives back exactly the one it took.
          ConditionExpression: 'attribute_exists(pk) AND keySlots >= :n',
          ExpressionAttributeValues: { ':n': keys.length },
        },
      });
    }
    try {
      await transact(ctx, items, (reasons) => {
        if (!memberRemoved && failedAt(reasons, 0)) return new MemberNotFoundError(workspaceId, memberId);
        // A key ended or changed hands since the read: read again and retry the round.
        return new KeysMovedError();
      });
    } catch (err) {
      if (err instanceof KeysMovedError) continue;
      throw err;
    }
    memberRemoved = true;
    (input.revokeKeys ? revokedKeyIds : keptKeyIds).push(...keys.map((k) => k.keyId));
  }
  throw new ConcurrentUpdateError(`the keys of member ${memberId}`);
}

/** A workspace's members, owner first. */
export async function listMembers(
  ctx: AdminContext,
  input: { workspaceId: string },
): Promise<{ memberId: string; role: 'owner' | 'member'; email: string | null; monthlyLimitMicros: number | null }[]> {
  checkWorkspaceId(input.workspaceId);
  if ((await getWorkspace(ctx, input.workspaceId)) === undefined) throw new WorkspaceNotFoundError(input.workspaceId);
  return (await listMemberRecords(ctx, input.workspaceId))
    .map((m) => ({ memberId: m.memberId, role: m.role, email: m.email ?? null, monthlyLimitMicros: m.monthlyLimitMicros ?? null }))
    .sort((a, b) => (a.role === b.role ? a.memberId.localeCompare(b.memberId) : a.role === 'owner' ? -1 : 1));
}

/**
 * Invitations to a workspace's console: created by the owner (console) or an operator (CLI).
 * Two kinds. A `join` invitation brings a new person in and holds one of the workspace's five
 * key slots while outstanding (SPEC: "an outstanding reservation attached to an invitation
 * occupies one of the five"), freed when the invitation is cancelled, lapses (its expiry passes)
 * or is accepted. A `passkey` invitation names an existing member (the owner handed a workspace
 * by the operator, or anyone who lost their passkey): accepting it adds a passkey to that member,
 * and since it brings no one new and reserves no key, it holds no slot.
 *
 * Layout (table `workspaces`): sk `INVITE#<invitationId>`, holding the SHA-256 of the
 * invitation's secret (the link carries the secret; the table never does), the e-mail, the role
 * and the member id the invitee will have. The slot is the same `keySlots` counter of the META
 * item that minting takes from, so minting and inviting can never hold more than five together.
 *
 * Lapsing is lazy: a lapsed invitation frees its slot the next time the workspace's invitations
 * are listed, an invitation is made, or a key mint finds every slot held (see `lapseInvitations`).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { AdminContext, TransactItem } from './directory-context';
import { META, failedAt, memberSk, newId, nowOf, table, transact } from './directory-context';
import type { MemberRecord } from '../shared/records';
import { AdminError, KeySlotsFullError, MemberNotFoundError, ValidationError, WorkspaceNotFoundError } from './directory-errors';
import { checkEmail } from './directory-validate';
import { checkWorkspaceId, getWorkspace, listMemberRecords, queryWorkspaceItems } from './directory-common';
import { takeKeySlotItem } from './directory-keys';

/** How long an invitation stays open unless the caller says otherwise: seven days. */
export const INVITATION_DEFAULT_HOURS = 168;
/** The longest an invitation may stay open: thirty days. */
export const INVITATION_MAX_HOURS = 720;

/** The invitation is unknown, lapsed, already used, or its secret does not match. */
export class InvitationNotFoundError extends AdminError {
  constructor() {
    super('invitation_not_found', 'this invitation is unknown, was cancelled, has lapsed or was already used; ask the owner for a new one');
    this.name = 'InvitationNotFoundError';
  }
}

/**
 * What an invitation is for: `join` brings a new member in (and holds a key slot); `passkey`
 * adds a passkey to an existing member (and holds none).
 */
export type InvitationKind = 'join' | 'passkey';

/** What is stored: never the secret. */
export interface InvitationRecord {
  readonly pk: string;
  readonly sk: string;
  readonly workspaceId: string;
  readonly invitationId: string;
  readonly secretHash: string;
  readonly email: string;
  readonly role: 'owner' | 'member';
  /** The member the invitee becomes (a new one), or the existing member a passkey is for. */
  readonly memberId: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  /** Who invited (principal), for the list. */
  readonly invitedBy: string;
  /** Absent on invitations made before kinds: an owner's was a passkey one, any other a join. */
  readonly kind?: InvitationKind;
  /** Whether it holds a key slot; absent on invitations made before kinds, which all held one. */
  readonly holdsKeySlot?: boolean;
}

/** An invitation as listed: no secret, no hash. */
export interface InvitationView {
  readonly invitationId: string;
  readonly email: string;
  readonly role: 'owner' | 'member';
  readonly memberId: string;
  readonly createdAt: string;
  readonly expiresAt: string;
  readonly invitedBy: string;
  readonly kind: InvitationKind;
  /** Whether it holds one of the workspace's five key slots while outstanding. */
  readonly holdsKeySlot: boolean;
}

/** The passkey the invitee registered, stored when the invitation is accepted. */
export interface NewPasskey {
  readonly credentialId: string;
  /** COSE public key, base64url. */
  readonly publicKey: string;
  readonly counter: number;
  readonly transports: readonly string[];
}

const INVITE_PREFIX = 'INVITE#';

/** Sort key of an invitation item. */
export function invitationSk(invitationId: string): string {
  return `${INVITE_PREFIX}${invitationId}`;
}

/** Sort key of a passkey item: one per credential, under the member's workspace. */
export function passkeySk(credentialId: string): string {
  return `PASSKEY#${credentialId}`;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function kindOf(r: Pick<InvitationRecord, 'kind' | 'role'>): InvitationKind {
  return r.kind ?? (r.role === 'owner' ? 'passkey' : 'join');
}

function toView(r: InvitationRecord): InvitationView {
  return {
    invitationId: r.invitationId,
    email: r.email,
    role: r.role,
    memberId: r.memberId,
    createdAt: new Date(r.createdAt).toISOString(),
    expiresAt: new Date(r.expiresAt).toISOString(),
    invitedBy: r.invitedBy,
    kind: kindOf(r),
    holdsKeySlot: r.holdsKeySlot ?? true,
  };
}

/** The token a link carries: `<invitationId>.<secret>`; split and checked for shape. */
export function parseInvitationToken(token: string): { invitationId: string; secret: string } {
  const m = /^(inv_[0-9a-f]{20})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (m === null) throw new InvitationNotFoundError();
  return { invitationId: m[1] as string, secret: m[2] as string };
}

/**
 * The existing member an invitation names, if any: `memberId` when given; for an `owner`
 * invitation the workspace's owner (how the operator hands a new workspace to its owner); for a
 * member invitation, the member who already has that e-mail.
 */
function existingTarget(members: readonly MemberRecord[], input: { workspaceId: string; email?: string; role?: 'owner' | 'member'; memberId?: string }): MemberRecord | undefined {
  if (input.memberId !== undefined) {
    const m = members.find((x) => x.memberId === input.memberId);
    if (m === undefined) throw new MemberNotFoundError(input.workspaceId, input.memberId);
    if (input.role !== undefined && input.role !== m.role) throw new ValidationError(`member ${m.memberId} is the workspace's ${m.role}; an invitation does not change a role`);
    return m;
  }
  if (input.role === 'owner') {
    const owner = members.find((m) => m.role === 'owner');
    if (owner === undefined) throw new WorkspaceNotFoundError(input.workspaceId);
    return owner;
  }
  const email = input.email?.toLowerCase();
  return email === undefined ? undefined : members.find((m) => m.email?.toLowerCase() === email);
}

/**
 * Invites someone. For a new person (a `join` invitation), one transaction takes a key slot
 * (refused when five are held) and writes the invitation, whose member id does not exist yet.
 * For an existing member (named by `memberId`, by `role: 'owner'`, or by an e-mail a member
 * already has), the invitation adds a passkey to that member (a `passkey` invitation): it takes
 * no slot, and its transaction checks the member is there. Returns the token for the link: shown
 * once, stored only as its hash.
 */
export async function createInvitation(
  ctx: AdminContext,
  input: { workspaceId: string; email?: string; role?: 'owner' | 'member'; memberId?: string; expiresInHours?: number; invitedBy: string },
): Promise<{ invitation: InvitationView; token: string }> {
  checkWorkspaceId(input.workspaceId);
  const given = input.email === undefined || input.email === '' ? undefined : checkEmail(input.email);
  const hours = input.expiresInHours ?? INVITATION_DEFAULT_HOURS;
  if (!Number.isSafeInteger(hours) || hours < 1 || hours > INVITATION_MAX_HOURS) throw new ValidationError(`an invitation lasts 1 to ${INVITATION_MAX_HOURS} hours, not ${String(hours)}`);
  await lapseInvitations(ctx, input.workspaceId);
  const target = existingTarget(await listMemberRecords(ctx, input.workspaceId), { ...input, ...(given === undefined ? {} : { email: given }) });
  const email = given ?? target?.email;
  if (email === undefined) {
    throw new ValidationError(target === undefined ? 'an e-mail is required' : `member ${target.memberId} has no e-mail on record: give the e-mail the passkey is for`);
  }
  const kind: InvitationKind = target === undefined ? 'join' : 'passkey';
  const now = nowOf(ctx);
  const invitationId = `inv_${randomBytes(10).toString('hex')}`;
  const secret = randomBytes(32).toString('base64url');
  const record: InvitationRecord = {
    pk: input.workspaceId,
    sk: invitationSk(invitationId),
    workspaceId: input.workspaceId,
    invitationId,
    secretHash: sha256(secret),
    email,
    role: target?.role ?? 'member',
    memberId: target?.memberId ?? newId('mem'),
    createdAt: now,
    expiresAt: now + hours * 3_600_000,
    invitedBy: input.invitedBy,
    kind,
    holdsKeySlot: kind === 'join',
  };
  const put: TransactItem = { Put: { TableName: table(ctx, 'workspaces'), Item: record, ConditionExpression: 'attribute_not_exists(pk)' } };
  if (kind === 'join') {
    await transact(
      ctx,
      [takeKeySlotItem(ctx, input.workspaceId), put],
      async (reasons) => {
        if (!failedAt(reasons, 0)) return undefined;
        return (await getWorkspace(ctx, input.workspaceId)) === undefined ? new WorkspaceNotFoundError(input.workspaceId) : new KeySlotsFullError(input.workspaceId);
      },
    );
  } else {
    await transact(
      ctx,
      [
        {
          // The member may have been removed since the read: an invitation for nobody is refused.
          ConditionCheck: {
            TableName: table(ctx, 'workspaces'),
            Key: { pk: input.workspaceId, sk: memberSk(record.memberId) },
            ConditionExpression: 'attribute_exists(pk)',
          },
        },
        put,
      ],
      (reasons) => (failedAt(reasons, 0) ? new MemberNotFoundError(input.workspaceId, record.memberId) : undefined),
    );
  }
  return { invitation: toView(record), token: `${invitationId}.${secret}` };
}

/**
 * The item that ends an invitation and, when it holds a key slot, the update that gives the slot
 * back, together.
 */
function endItems(
  ctx: AdminContext,
  r: { workspaceId: string; invitationId: string; holdsKeySlot: boolean },
  extraCondition?: { expr: string; values: Record<string, unknown> },
): TransactItem[] {
  const end: TransactItem[] = [
    {
      Delete: {
        TableName: table(ctx, 'workspaces'),
        Key: { pk: r.workspaceId, sk: invitationSk(r.invitationId) },
        ConditionExpression: `attribute_exists(pk)${extraCondition === undefined ? '' : ` AND ${extraCondition.expr}`}`,
        ...(extraCondition === undefined ? {} : { ExpressionAttributeValues: extraCondition.values }),
      },
    },
  ];
  if (!r.holdsKeySlot) return end;
  return [
    ...end,
    {
      Update: {
        TableName: table(ctx, 'workspaces'),
        Key: { pk: r.workspaceId, sk: META },
        UpdateExpression: 'SET keySlots = keySlots - :one',
        // Never below zero: the invitation gives back exactly the one slot it took.
        ConditionExpression: 'attribute_exists(pk) AND keySlots >= :one',
        ExpressionAttributeValues: { ':one': 1 },
      },
    },
  ];
}

async function records(ctx: AdminContext, workspaceId: string): Promise<InvitationRecord[]> {
  return queryWorkspaceItems<InvitationRecord>(ctx, workspaceId, INVITE_PREFIX);
}

/**
 * Ends every lapsed invitation of a workspace and frees its slot; returns how many. Each is its
 * own transaction conditional on the invitation still being there and still lapsed, so two
 * callers racing free each slot once.
 */
export async function lapseInvitations(ctx: AdminContext, workspaceId: string): Promise<number> {
  const now = nowOf(ctx);
  let lapsed = 0;
  for (const r of await records(ctx, workspaceId)) {
    if (r.expiresAt > now) continue;
    try {
      await transact(ctx, endItems(ctx, { workspaceId, invitationId: r.invitationId, holdsKeySlot: toView(r).holdsKeySlot }, { expr: 'expiresAt <= :now', values: { ':now': now } }), () => new InvitationNotFoundError());
      lapsed++;
    } catch (err) {
      if (!(err instanceof InvitationNotFoundError)) throw err;
    }
  }
  return lapsed;
}

/** The outstanding invitations of a workspace (lapsed ones are ended first), oldest first. */
export async function listInvitations(ctx: AdminContext, input: { workspaceId: string }): Promise<InvitationView[]> {
  checkWorkspaceId(input.workspaceId);
  if ((await getWorkspace(ctx, input.workspaceId)) === undefined) throw new WorkspaceNotFoundError(input.workspaceId);
  await lapseInvitations(ctx, input.workspaceId);
  return (await records(ctx, input.workspaceId)).sort((a, b) => a.createdAt - b.createdAt).map(toView);
}

/** Cancels an outstanding invitation and frees its slot (when it holds one). */
export async function cancelInvitation(ctx: AdminContext, input: { workspaceId: string; invitationId: string }): Promise<{ invitationId: string; freedKeySlot: boolean }> {
  checkWorkspaceId(input.workspaceId);
  const got = await ctx.doc.send(
    new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: input.workspaceId, sk: invitationSk(input.invitationId) }, ConsistentRead: true }),
  );
  if (got.Item === undefined) throw new InvitationNotFoundError();
  // Whether it holds a slot never changes, so the read decides the transaction's shape; the
  // delete's condition still makes two racing cancels free the slot once.
  const { holdsKeySlot } = toView(got.Item as InvitationRecord);
  await transact(ctx, endItems(ctx, { ...input, holdsKeySlot }), () => new InvitationNotFoundError());
  return { invitationId: input.invitationId, freedKeySlot: holdsKeySlot };
}

/**
 * Reads the outstanding invitation a token names, checking its secret (constant time) and
 * expiry. Anything wrong is `InvitationNotFoundError`, one message for every case, so a guessed
 * token learns nothing.
 */
export async function openInvitation(ctx: AdminContext, input: { workspaceId: string; token: string }): Promise<InvitationView> {
  checkWorkspaceId(input.workspaceId);
  const { invitationId, secret } = parseInvitationToken(input.token);
  const got = await ctx.doc.send(
    new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: input.workspaceId, sk: invitationSk(invitationId) }, ConsistentRead: true }),
  );
  const r = got.Item as InvitationRecord | undefined;
  if (r === undefined || r.expiresAt <= nowOf(ctx)) throw new InvitationNotFoundError();
  const given = Buffer.from(sha256(secret), 'hex');
  if (!timingSafeEqual(given, Buffer.from(r.secretHash, 'hex'))) throw new InvitationNotFoundError();
  return toView(r);
}

/**
 * Accepts an invitation with the passkey the invitee just registered, in one transaction: the
 * invitation ends (still there, same secret, not lapsed), its slot frees (a join invitation's),
 * the member is written (or, for a passkey invitation, the member is checked to still be there
 * in the same role and given the e-mail if their record had none) and the passkey is stored.
 * Either all of it happens or none.
 */
export async function acceptInvitation(
  ctx: AdminContext,
  input: { workspaceId: string; token: string; passkey: NewPasskey },
): Promise<{ memberId: string; role: 'owner' | 'member'; email: string; kind: InvitationKind }> {
  const invitation = await openInvitation(ctx, input);
  const { secret } = parseInvitationToken(input.token);
  const now = nowOf(ctx);
  const ws = input.workspaceId;
  const memberItem: TransactItem =
    invitation.kind === 'passkey'
      ? {
          // The member keeps their record (keys, limits); it gains the invitation's e-mail if it had none.
          Update: {
            TableName: table(ctx, 'workspaces'),
            Key: { pk: ws, sk: memberSk(invitation.memberId) },
            UpdateExpression: 'SET email = if_not_exists(email, :email)',
            ConditionExpression: 'attribute_exists(pk) AND #role = :role',
            ExpressionAttributeNames: { '#role': 'role' },
            ExpressionAttributeValues: { ':role': invitation.role, ':email': invitation.email },
          },
        }
      : {
          Put: {
            TableName: table(ctx, 'workspaces'),
            Item: { pk: ws, sk: memberSk(invitation.memberId), workspaceId: ws, memberId: invitation.memberId, role: 'member', email: invitation.email },
            ConditionExpression: 'attribute_not_exists(pk)',
          },
        };
  const end = endItems(ctx, { workspaceId: ws, invitationId: invitation.invitationId, holdsKeySlot: invitation.holdsKeySlot }, {
    expr: 'secretHash = :h AND expiresAt > :now',
    values: { ':h': sha256(secret), ':now': now },
  });
  await transact(
    ctx,
    [
      ...end,
      memberItem,
      {
        Put: {
          TableName: table(ctx, 'workspaces'),
          Item: {
            pk: ws,
            sk: passkeySk(input.passkey.credentialId),
            workspaceId: ws,
            memberId: invitation.memberId,
            credentialId: input.passkey.credentialId,
            publicKey: input.passkey.publicKey,
            counter: input.passkey.counter,
            transports: [...input.passkey.transports],
            createdAt: now,
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        },
      },
    ],
    (reasons) => (failedAt(reasons, end.length) && invitation.kind === 'passkey' ? new MemberNotFoundError(ws, invitation.memberId) : new InvitationNotFoundError()),
  );
  return { memberId: invitation.memberId, role: invitation.role, email: invitation.email, kind: invitation.kind };
}

/** Whether an invitation is still outstanding (not cancelled, accepted or lapsed-and-ended). */
export async function invitationExists(ctx: AdminContext, input: { workspaceId: string; invitationId: string }): Promise<boolean> {
  const got = await ctx.doc.send(new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: input.workspaceId, sk: invitationSk(input.invitationId) }, ConsistentRead: true }));
  return got.Item !== undefined;
}

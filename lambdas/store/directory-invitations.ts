/**
 * Invitations to a workspace's console: created by the owner (console) or an operator (CLI),
 * each holding one of the workspace's five key slots while outstanding (SPEC: "an outstanding
 * reservation attached to an invitation occupies one of the five"), freed when the invitation
 * is cancelled, lapses (its expiry passes) or is accepted.
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
import { AdminError, KeySlotsFullError, MemberNotFoundError, ValidationError, WorkspaceNotFoundError } from './directory-errors';
import { checkEmail } from './directory-validate';
import { checkWorkspaceId, getWorkspace, listMemberRecords, queryWorkspaceItems } from './directory-common';
import { MAX_KEY_SLOTS } from './directory-keys';

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

/** What is stored: never the secret. */
export interface InvitationRecord {
  readonly pk: string;
  readonly sk: string;
  readonly workspaceId: string;
  readonly invitationId: string;
  readonly secretHash: string;
  readonly email: string;
  readonly role: 'owner' | 'member';
  /** The member the invitee becomes (a new one), or the owner's existing member id. */
  readonly memberId: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  /** Who invited (principal), for the list. */
  readonly invitedBy: string;
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

function toView(r: InvitationRecord): InvitationView {
  return {
    invitationId: r.invitationId,
    email: r.email,
    role: r.role,
    memberId: r.memberId,
    createdAt: new Date(r.createdAt).toISOString(),
    expiresAt: new Date(r.expiresAt).toISOString(),
    invitedBy: r.invitedBy,
  };
}

/** The token a link carries: `<invitationId>.<secret>`; split and checked for shape. */
export function parseInvitationToken(token: string): { invitationId: string; secret: string } {
  const m = /^(inv_[0-9a-f]{20})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (m === null) throw new InvitationNotFoundError();
  return { invitationId: m[1] as string, secret: m[2] as string };
}

/**
 * Invites someone. One transaction takes a key slot (refused when five are held) and writes the
 * invitation. A `member` invitation names a member id that does not exist yet; an `owner`
 * invitation (how the operator hands a new workspace to its owner) names the existing owner.
 * Returns the token for the link: shown once, stored only as its hash.
 */
export async function createInvitation(
  ctx: AdminContext,
  input: { workspaceId: string; email: string; role?: 'owner' | 'member'; expiresInHours?: number; invitedBy: string },
): Promise<{ invitation: InvitationView; token: string }> {
  checkWorkspaceId(input.workspaceId);
  const email = checkEmail(input.email);
  const role = input.role ?? 'member';
  const hours = input.expiresInHours ?? INVITATION_DEFAULT_HOURS;
  if (!Number.isSafeInteger(hours) || hours < 1 || hours > INVITATION_MAX_HOURS) throw new ValidationError(`an invitation lasts 1 to ${INVITATION_MAX_HOURS} hours, not ${String(hours)}`);
  await lapseInvitations(ctx, input.workspaceId);
  const members = await listMemberRecords(ctx, input.workspaceId);
  let memberId: string;
  if (role === 'owner') {
    const owner = members.find((m) => m.role === 'owner');
    if (owner === undefined) throw new WorkspaceNotFoundError(input.workspaceId);
    memberId = owner.memberId;
  } else {
    if (members.some((m) => m.email?.toLowerCase() === email.toLowerCase())) throw new ValidationError(`${email} is already a member of workspace ${input.workspaceId}`);
    memberId = newId('mem');
  }
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
    role,
    memberId,
    createdAt: now,
    expiresAt: now + hours * 3_600_000,
    invitedBy: input.invitedBy,
  };
  await transact(
    ctx,
    [
      {
        Update: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: input.workspaceId, sk: META },
          UpdateExpression: 'SET keySlots = if_not_exists(keySlots, :zero) + :one',
          ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(keySlots) OR keySlots < :max)',
          ExpressionAttributeValues: { ':zero': 0, ':one': 1, ':max': MAX_KEY_SLOTS },
        },
      },
      { Put: { TableName: table(ctx, 'workspaces'), Item: record, ConditionExpression: 'attribute_not_exists(pk)' } },
    ],
    async (reasons) => {
      if (!failedAt(reasons, 0)) return undefined;
      return (await getWorkspace(ctx, input.workspaceId)) === undefined ? new WorkspaceNotFoundError(input.workspaceId) : new KeySlotsFullError(input.workspaceId);
    },
  );
  return { invitation: toView(record), token: `${invitationId}.${secret}` };
}

/** The item that ends an invitation and the update that gives its slot back, as one pair. */
function endItems(ctx: AdminContext, r: { workspaceId: string; invitationId: string }, extraCondition?: { expr: string; values: Record<string, unknown> }): TransactItem[] {
  return [
    {
      Delete: {
        TableName: table(ctx, 'workspaces'),
        Key: { pk: r.workspaceId, sk: invitationSk(r.invitationId) },
        ConditionExpression: `attribute_exists(pk)${extraCondition === undefined ? '' : ` AND ${extraCondition.expr}`}`,
        ...(extraCondition === undefined ? {} : { ExpressionAttributeValues: extraCondition.values }),
      },
    },
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
      await transact(ctx, endItems(ctx, r, { expr: 'expiresAt <= :now', values: { ':now': now } }), () => new InvitationNotFoundError());
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

/** Cancels an outstanding invitation and frees its slot. */
export async function cancelInvitation(ctx: AdminContext, input: { workspaceId: string; invitationId: string }): Promise<{ invitationId: string }> {
  checkWorkspaceId(input.workspaceId);
  await transact(ctx, endItems(ctx, input), () => new InvitationNotFoundError());
  return { invitationId: input.invitationId };
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
 * invitation ends (still there, same secret, not lapsed), its slot frees, the member is written
 * (or, for an owner invitation, the owner is checked to still be the owner and given the e-mail
 * if their record had none) and the passkey is
 * stored. Either all of it happens or none.
 */
export async function acceptInvitation(
  ctx: AdminContext,
  input: { workspaceId: string; token: string; passkey: NewPasskey },
): Promise<{ memberId: string; role: 'owner' | 'member'; email: string }> {
  const invitation = await openInvitation(ctx, input);
  const { secret } = parseInvitationToken(input.token);
  const now = nowOf(ctx);
  const ws = input.workspaceId;
  const memberItem: TransactItem =
    invitation.role === 'owner'
      ? {
          // The owner keeps their member record; it gains the invitation's e-mail if it had none.
          Update: {
            TableName: table(ctx, 'workspaces'),
            Key: { pk: ws, sk: memberSk(invitation.memberId) },
            UpdateExpression: 'SET email = if_not_exists(email, :email)',
            ConditionExpression: 'attribute_exists(pk) AND #role = :owner',
            ExpressionAttributeNames: { '#role': 'role' },
            ExpressionAttributeValues: { ':owner': 'owner', ':email': invitation.email },
          },
        }
      : {
          Put: {
            TableName: table(ctx, 'workspaces'),
            Item: { pk: ws, sk: memberSk(invitation.memberId), workspaceId: ws, memberId: invitation.memberId, role: 'member', email: invitation.email },
            ConditionExpression: 'attribute_not_exists(pk)',
          },
        };
  await transact(
    ctx,
    [
      ...endItems(ctx, { workspaceId: ws, invitationId: invitation.invitationId }, {
        expr: 'secretHash = :h AND expiresAt > :now',
        values: { ':h': sha256(secret), ':now': now },
      }),
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
    (reasons) => (failedAt(reasons, 2) && invitation.role === 'owner' ? new MemberNotFoundError(ws, invitation.memberId) : new InvitationNotFoundError()),
  );
  return { memberId: invitation.memberId, role: invitation.role, email: invitation.email };
}

/** Whether an invitation is still outstanding (not cancelled, accepted or lapsed-and-ended). */
export async function invitationExists(ctx: AdminContext, input: { workspaceId: string; invitationId: string }): Promise<boolean> {
  const got = await ctx.doc.send(new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: input.workspaceId, sk: invitationSk(input.invitationId) }, ConsistentRead: true }));
  return got.Item !== undefined;
}

/**
 * The console's sign-in state in the `workspaces` table: WebAuthn challenges (single use),
 * passkeys (one per credential, under the member's workspace) and sessions (looked up by the
 * SHA-256 of the cookie's random id; the id itself is never stored).
 *
 * Challenges and sessions get a partition of their own each (`CHALLENGE#<challenge>`,
 * `SESSION#<hash>`), so no partition is written by every sign-in, and a `ttl` so DynamoDB
 * collects the ones nobody used. Expiry is checked on every read: TTL is garbage collection
 * only (it lags by up to days).
 */
import { createHash } from 'node:crypto';
import { DeleteCommand, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { MemberRecord } from '../shared/records';
import type { AdminContext } from './directory-context';
import { memberSk, nowOf, table } from './directory-context';
import { passkeySk } from './directory-invitations';

/** What a challenge was issued for. */
export type ChallengePurpose = 'signin' | 'join';

/** A stored challenge. */
export interface ChallengeRecord {
  readonly purpose: ChallengePurpose;
  /** For `join`: the workspace and invitation the registration is for. */
  readonly workspaceId?: string;
  readonly invitationId?: string;
  readonly expiresAt: number;
}

/** A stored passkey. */
export interface PasskeyRecord {
  readonly workspaceId: string;
  readonly memberId: string;
  readonly credentialId: string;
  /** COSE public key, base64url. */
  readonly publicKey: string;
  readonly counter: number;
  readonly transports?: readonly string[];
}

/** A live session, as read back. */
export interface SessionRecord {
  readonly workspaceId: string;
  readonly memberId: string;
  /** The per-session CSRF token every change must send back in a header. */
  readonly csrf: string;
  readonly createdAt: number;
  readonly expiresAt: number;
}

const SINGLE = 'ITEM';

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Epoch seconds for DynamoDB TTL, a day after the expiry (TTL only collects garbage). */
function ttlOf(expiresAt: number): number {
  return Math.floor(expiresAt / 1000) + 86_400;
}

/** Stores a challenge until `expiresAt`. */
export async function putChallenge(ctx: AdminContext, challenge: string, record: ChallengeRecord): Promise<void> {
  await ctx.doc.send(
    new PutCommand({
      TableName: table(ctx, 'workspaces'),
      Item: { pk: `CHALLENGE#${challenge}`, sk: SINGLE, ...record, ttl: ttlOf(record.expiresAt) },
      ConditionExpression: 'attribute_not_exists(pk)',
    }),
  );
}

/**
 * Takes a challenge: deletes it and returns what it was issued for, or undefined when it is
 * unknown, already taken or expired. The delete is what makes a challenge single-use: of two
 * answers to one challenge only one gets it back.
 */
export async function takeChallenge(ctx: AdminContext, challenge: string): Promise<ChallengeRecord | undefined> {
  const out = await ctx.doc.send(
    new DeleteCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: `CHALLENGE#${challenge}`, sk: SINGLE }, ReturnValues: 'ALL_OLD' }),
  );
  const r = out.Attributes as ChallengeRecord | undefined;
  if (r === undefined || r.expiresAt <= nowOf(ctx)) return undefined;
  return r;
}

/** A workspace's passkey by credential id. */
export async function getPasskey(ctx: AdminContext, workspaceId: string, credentialId: string): Promise<PasskeyRecord | undefined> {
  const out = await ctx.doc.send(new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: workspaceId, sk: passkeySk(credentialId) }, ConsistentRead: true }));
  return out.Item as PasskeyRecord | undefined;
}

/**
 * Records the authenticator's new signature counter. Conditional on the counter moving forward
 * (or both being zero, as platform authenticators that keep no counter report), so a cloned
 * authenticator replaying an old counter loses.
 */
export async function advancePasskeyCounter(ctx: AdminContext, p: PasskeyRecord, counter: number): Promise<boolean> {
  try {
    await ctx.doc.send(
      new UpdateCommand({
        TableName: table(ctx, 'workspaces'),
        Key: { pk: p.workspaceId, sk: passkeySk(p.credentialId) },
        UpdateExpression: 'SET #c = :new, lastUsedAt = :now',
        ConditionExpression: 'attribute_exists(pk) AND (#c < :new OR (#c = :zero AND :new = :zero))',
        ExpressionAttributeNames: { '#c': 'counter' },
        ExpressionAttributeValues: { ':new': counter, ':zero': 0, ':now': nowOf(ctx) },
      }),
    );
    return true;
  } catch (err) {
    if ((err as Error).name === 'ConditionalCheckFailedException') return false;
    throw err;
  }
}

/** A member record, read consistently (a session's role is checked on every request). */
export async function getMember(ctx: AdminContext, workspaceId: string, memberId: string): Promise<MemberRecord | undefined> {
  const out = await ctx.doc.send(new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: workspaceId, sk: memberSk(memberId) }, ConsistentRead: true }));
  return out.Item as MemberRecord | undefined;
}

/** Stores a session under the hash of its id. */
export async function putSession(ctx: AdminContext, sessionId: string, record: SessionRecord): Promise<void> {
  await ctx.doc.send(
    new PutCommand({
      TableName: table(ctx, 'workspaces'),
      Item: { pk: `SESSION#${hash(sessionId)}`, sk: SINGLE, ...record, ttl: ttlOf(record.expiresAt) },
      ConditionExpression: 'attribute_not_exists(pk)',
    }),
  );
}

/** The live session of an id, or undefined (unknown, signed out or expired). */
export async function getSession(ctx: AdminContext, sessionId: string): Promise<SessionRecord | undefined> {
  const out = await ctx.doc.send(new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: `SESSION#${hash(sessionId)}`, sk: SINGLE }, ConsistentRead: true }));
  const r = out.Item as SessionRecord | undefined;
  if (r === undefined || r.expiresAt <= nowOf(ctx)) return undefined;
  return r;
}

/** Ends a session (sign-out). */
export async function deleteSession(ctx: AdminContext, sessionId: string): Promise<void> {
  await ctx.doc.send(new DeleteCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: `SESSION#${hash(sessionId)}`, sk: SINGLE } }));
}

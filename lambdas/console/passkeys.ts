/**
 * Sign-in with passkeys (WebAuthn, `@simplewebauthn/server`): joining through an invitation
 * registers a passkey; signing in asserts one. Discoverable credentials, user verification
 * required, no attestation (nothing here depends on the authenticator's make). Challenges are
 * stored and single-use; a passkey's user handle names its workspace and member, so sign-in
 * needs no user name and reveals nothing about who exists.
 */
import { randomBytes } from 'node:crypto';
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { recordAudit } from '../store/audit';
import { advancePasskeyCounter, getMember, getPasskey, putChallenge, putSession, takeChallenge, type ChallengeRecord } from '../store/console-auth';
import { acceptInvitation, openInvitation, parseInvitationToken } from '../store/directory-invitations';
import { consolePrincipal, type ConsoleDeps } from './ports';

/** How long a challenge may be answered: five minutes. */
const CHALLENGE_MS = 5 * 60_000;

/** Sign-in or joining failed; one message for a person, no detail for an attacker. */
export class SignInError extends Error {
  constructor(message = 'The passkey could not be verified. Try again, or ask the owner for a new invitation.') {
    super(message);
    this.name = 'SignInError';
  }
}

/** A new session, for the cookie and the page. */
export interface NewSession {
  readonly sessionId: string;
  readonly expiresAt: number;
  readonly workspaceId: string;
  readonly memberId: string;
}

function nowOf(deps: ConsoleDeps): number {
  return (deps.now ?? deps.admin.ctx.now ?? Date.now)();
}

function token(deps: ConsoleDeps, bytes: number): string {
  return deps.randomToken?.(bytes) ?? randomBytes(bytes).toString('base64url');
}

/** The user handle of a passkey: `<workspaceId>|<memberId>` (under WebAuthn's 64 bytes). */
function userHandle(workspaceId: string, memberId: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(`${workspaceId}|${memberId}`);
}

function parseUserHandle(handle: string | undefined): { workspaceId: string; memberId: string } {
  const text = Buffer.from(handle ?? '', 'base64url').toString('utf8');
  const m = /^(ws_[0-9a-f]{20})\|(mem_[0-9a-f]{20})$/.exec(text);
  if (m === null) throw new SignInError();
  return { workspaceId: m[1] as string, memberId: m[2] as string };
}

/** base64url text as a fresh byte array (the library wants one over a plain ArrayBuffer). */
function bytes(b64url: string): Uint8Array<ArrayBuffer> {
  const buf = Buffer.from(b64url, 'base64url');
  const out = new Uint8Array(new ArrayBuffer(buf.length));
  out.set(buf);
  return out;
}

/** The challenge a response answers, read from its client data (verified again by the library). */
function challengeOf(clientDataJSON: string): string {
  try {
    const data = JSON.parse(Buffer.from(clientDataJSON, 'base64url').toString('utf8')) as { challenge?: unknown };
    if (typeof data.challenge === 'string' && /^[A-Za-z0-9_-]{16,128}$/.test(data.challenge)) return data.challenge;
  } catch {
    // fall through: not client data
  }
  throw new SignInError();
}

async function take(deps: ConsoleDeps, clientDataJSON: string, purpose: ChallengeRecord['purpose']): Promise<{ challenge: string; record: ChallengeRecord }> {
  const challenge = challengeOf(clientDataJSON);
  const record = await takeChallenge(deps.admin.ctx, challenge);
  if (record === undefined || record.purpose !== purpose) throw new SignInError('The sign-in took too long or was already used; start again.');
  return { challenge, record };
}

async function startSession(deps: ConsoleDeps, workspaceId: string, memberId: string): Promise<NewSession> {
  const now = nowOf(deps);
  const sessionId = token(deps, 32);
  const expiresAt = now + deps.config.sessionMs;
  await putSession(deps.admin.ctx, sessionId, { workspaceId, memberId, csrf: token(deps, 32), createdAt: now, expiresAt });
  return { sessionId, expiresAt, workspaceId, memberId };
}

/** Registration options for the invitee of a valid invitation. */
export async function joinOptions(deps: ConsoleDeps, input: { workspaceId: string; invitation: string }): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const inv = await openInvitation(deps.admin.ctx, { workspaceId: input.workspaceId, token: input.invitation });
  const options = await generateRegistrationOptions({
    rpName: deps.config.rpName,
    rpID: deps.config.rpId,
    userID: userHandle(input.workspaceId, inv.memberId),
    userName: inv.email,
    userDisplayName: inv.email,
    attestationType: 'none',
    authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
    timeout: CHALLENGE_MS,
  });
  await putChallenge(deps.admin.ctx, options.challenge, {
    purpose: 'join',
    workspaceId: input.workspaceId,
    invitationId: inv.invitationId,
    expiresAt: nowOf(deps) + CHALLENGE_MS,
  });
  return options;
}

/**
 * Verifies the invitee's new passkey, accepts the invitation (one transaction: the invitation
 * ends, a join invitation's slot frees, the member and the passkey are written), audits it under
 * the member (`member.join`, or `member.passkey` when an existing member added a passkey), and
 * signs them in.
 */
export async function joinVerify(
  deps: ConsoleDeps,
  input: { workspaceId: string; invitation: string; response: RegistrationResponseJSON; requestId: string },
): Promise<NewSession> {
  const { challenge, record } = await take(deps, input.response.response.clientDataJSON, 'join');
  const { invitationId } = parseInvitationToken(input.invitation);
  if (record.workspaceId !== input.workspaceId || record.invitationId !== invitationId) throw new SignInError();
  let verified;
  try {
    verified = await verifyRegistrationResponse({
      response: input.response,
      expectedChallenge: challenge,
      expectedOrigin: deps.config.origin,
      expectedRPID: deps.config.rpId,
      requireUserVerification: true,
    });
  } catch {
    throw new SignInError();
  }
  if (!verified.verified) throw new SignInError();
  const cred = verified.registrationInfo.credential;
  const joined = await acceptInvitation(deps.admin.ctx, {
    workspaceId: input.workspaceId,
    token: input.invitation,
    passkey: { credentialId: cred.id, publicKey: Buffer.from(cred.publicKey).toString('base64url'), counter: cred.counter, transports: cred.transports ?? [] },
  });
  const who = { workspaceId: input.workspaceId, memberId: joined.memberId };
  await recordAudit(deps.admin.ctx, {
    at: nowOf(deps),
    who: consolePrincipal(who),
    // A passkey invitation adds a passkey to someone already in: not a join.
    action: joined.kind === 'passkey' ? 'member.passkey' : 'member.join',
    workspaceId: input.workspaceId,
    requestId: input.requestId,
    summary: { memberId: joined.memberId, role: joined.role, invitationId },
  });
  return startSession(deps, input.workspaceId, joined.memberId);
}

/** Authentication options: any discoverable passkey of this console's RP may answer. */
export async function signInOptions(deps: ConsoleDeps): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const options = await generateAuthenticationOptions({ rpID: deps.config.rpId, userVerification: 'required', timeout: CHALLENGE_MS });
  await putChallenge(deps.admin.ctx, options.challenge, { purpose: 'signin', expiresAt: nowOf(deps) + CHALLENGE_MS });
  return options;
}

/** Verifies a passkey assertion and signs its member in; the member must still be in the workspace. */
export async function signInVerify(deps: ConsoleDeps, input: { response: AuthenticationResponseJSON }): Promise<NewSession> {
  const { challenge } = await take(deps, input.response.response.clientDataJSON, 'signin');
  const { workspaceId, memberId } = parseUserHandle(input.response.response.userHandle);
  const passkey = await getPasskey(deps.admin.ctx, workspaceId, input.response.id);
  if (passkey === undefined || passkey.memberId !== memberId) throw new SignInError();
  let verified;
  try {
    verified = await verifyAuthenticationResponse({
      response: input.response,
      expectedChallenge: challenge,
      expectedOrigin: deps.config.origin,
      expectedRPID: deps.config.rpId,
      credential: {
        id: passkey.credentialId,
        publicKey: bytes(passkey.publicKey),
        counter: passkey.counter,
      },
      requireUserVerification: true,
    });
  } catch {
    throw new SignInError();
  }
  if (!verified.verified) throw new SignInError();
  if (!(await advancePasskeyCounter(deps.admin.ctx, passkey, verified.authenticationInfo.newCounter))) throw new SignInError();
  if ((await getMember(deps.admin.ctx, workspaceId, memberId)) === undefined) throw new SignInError('You are no longer a member of this workspace.');
  return startSession(deps, workspaceId, memberId);
}

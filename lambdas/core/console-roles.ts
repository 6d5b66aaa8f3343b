/**
 * Who may make which change from the console: one table over the management API's audit
 * actions, so that a change the console can reach and its role are written once. SPEC: only the
 * owner manages billing, the spend-rate cap and the pause; any member may read them. Pure.
 */

/** Who may make a change from the console. `operator`: nobody there (the CLI only). */
export type ConsoleAllowance = 'member' | 'owner' | 'operator';

/** A signed-in person's role in their workspace. */
export type ConsoleRole = 'owner' | 'member';

/**
 * Every management action a console session may ask for, with who may. An action missing from
 * this table is refused (fail closed), so a new management route is unreachable from the
 * console until someone decides here who may use it.
 */
export const CONSOLE_ACTIONS = {
  // The pause, the spend-rate cap, the monthly limit and billing settings: the owner's (SPEC).
  'workspace.pause': 'owner',
  'workspace.resume': 'owner',
  'workspace.spend-cap': 'owner',
  'workspace.limit': 'owner',
  'workspace.low-credit': 'owner',
  // Widening the permitted set is the owner's (SPEC: "a workspace owner must widen the set").
  'workspace.permit': 'owner',
  'workspace.permit.add': 'owner',
  'workspace.permit.remove': 'owner',
  'workspace.default-route': 'member',
  // People: the owner invites, removes and limits; a member joins only through an invitation.
  'member.invite': 'owner',
  'member.invite.cancel': 'owner',
  'member.limit': 'owner',
  'member.remove': 'owner',
  'member.add': 'operator',
  // Keys belong to the workspace: anyone in it may mint, revoke or rotate one. A key's credit
  // limit is billing, the owner's.
  'key.create': 'member',
  'key.revoke': 'member',
  'key.rotate': 'member',
  'key.expiry': 'member',
  'key.limit': 'owner',
  'profile.create': 'member',
  'profile.reorder': 'member',
  'profile.delete': 'member',
  // Own provider keys bill the workspace directly: billing, the owner's.
  'byok.set': 'owner',
  'byok.remove': 'owner',
  // Buying credit is not the console's (SPEC leaves the purchase flow out).
  'credit.add': 'operator',
  'credit.adjust': 'operator',
  // The ledger's slice count is how the store carries a hot workspace: the service's operators'.
  'workspace.slices': 'operator',
} as const satisfies Record<string, ConsoleAllowance>;

/** What a role may do with one action: allowed, or refused with the reason for a person. */
export type ConsoleDecision = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

const WHAT: Readonly<Record<string, string>> = {
  'workspace.pause': 'pause the workspace',
  'workspace.resume': 'resume the workspace',
  'workspace.spend-cap': 'change the spend-rate cap',
  'workspace.limit': "change the workspace's monthly limit",
  'workspace.low-credit': 'change the low-credit threshold',
  'key.limit': "change a key's credit limit",
  'byok.set': 'set a provider key',
  'byok.remove': 'remove a provider key',
};

/**
 * Decides whether `role` may perform `action` (a management audit action). Reads (no action)
 * are not decided here: every member may read their workspace.
 */
export function decideConsoleAction(role: ConsoleRole, action: string): ConsoleDecision {
  const allowance = (CONSOLE_ACTIONS as Readonly<Record<string, ConsoleAllowance>>)[action];
  if (allowance === undefined || allowance === 'operator') {
    return { allowed: false, reason: `The console cannot do this (${action}); an operator does it with the sluice CLI.` };
  }
  if (allowance === 'owner' && role !== 'owner') {
    const what = WHAT[action] ?? `do this (${action})`;
    return { allowed: false, reason: `Only the workspace's owner can ${what}; you are a member of this workspace.` };
  }
  return { allowed: true };
}

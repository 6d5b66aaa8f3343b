/**
 * Domain errors of the operator surface. Every refusal an admin operation makes is one of these,
 * so the CLI can print one line and scripts can branch on `code` (never on the message).
 */

import { formatMoney } from '../core/money-format';

/** Root of every operator-facing refusal; `code` is stable, `message` is for a person (money as `USD 20.50`). */
export class AdminError extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.name = 'AdminError';
    this.code = code;
  }
}

/** An argument failed validation before anything was read or written. */
export class ValidationError extends AdminError {
  constructor(message: string) {
    super('invalid_argument', message);
    this.name = 'ValidationError';
  }
}

/** The workspace does not exist. */
export class WorkspaceNotFoundError extends AdminError {
  constructor(workspaceId: string) {
    super('workspace_not_found', `workspace ${workspaceId} does not exist`);
    this.name = 'WorkspaceNotFoundError';
  }
}

/** The member does not exist in that workspace. */
export class MemberNotFoundError extends AdminError {
  constructor(workspaceId: string, memberId: string) {
    super('member_not_found', `member ${memberId} does not exist in workspace ${workspaceId}`);
    this.name = 'MemberNotFoundError';
  }
}

/** The owner cannot be removed: the workspace would have nobody who manages billing. */
export class OwnerRemovalError extends AdminError {
  constructor(memberId: string) {
    super('owner_not_removable', `member ${memberId} is the workspace owner and cannot be removed`);
    this.name = 'OwnerRemovalError';
  }
}

/** The key does not exist in that workspace (or has ended). */
export class KeyNotFoundError extends AdminError {
  constructor(workspaceId: string, ref: string) {
    super('key_not_found', `no live key ${ref} in workspace ${workspaceId}`);
    this.name = 'KeyNotFoundError';
  }
}

/** A visible part matched more than one live key; the key id is needed. */
export class AmbiguousKeyError extends AdminError {
  constructor(visible: string, keyIds: readonly string[]) {
    super('key_ambiguous', `visible part ${visible} matches keys ${keyIds.join(', ')}; name one by its key id`);
    this.name = 'AmbiguousKeyError';
  }
}

/** All five key slots are held (SPEC: at most five live keys per workspace). */
export class KeySlotsFullError extends AdminError {
  constructor(workspaceId: string) {
    super('key_slots_full', `workspace ${workspaceId} already holds five keys; a slot frees when a key ends`);
    this.name = 'KeySlotsFullError';
  }
}

/**
 * An expired key cannot be given a new expiry, nor a replacement by rotation: SPEC says expired
 * keys are never renewed (a new key is created). It can still be revoked, which frees its slot.
 */
export class KeyExpiredError extends AdminError {
  constructor(keyId: string, expiredAt: number, refused: 'expiry' | 'rotate' = 'expiry') {
    const when = new Date(expiredAt).toISOString();
    super(
      'key_expired',
      refused === 'rotate'
        ? `key ${keyId} expired at ${when}: an expired key is never renewed, so it can be revoked (which frees its slot) but not rotated; create a new key`
        : `key ${keyId} expired at ${when} and is never renewed; create a new key`,
    );
    this.name = 'KeyExpiredError';
  }
}

/** A spend rate cap outside what the operator may set. */
export class SpendCapError extends AdminError {
  constructor(message: string) {
    super('spend_cap_refused', message);
    this.name = 'SpendCapError';
  }
}

/** The routing profile does not exist. */
export class ProfileNotFoundError extends AdminError {
  constructor(workspaceId: string, identifier: string) {
    super('profile_not_found', `profile ${identifier} does not exist in workspace ${workspaceId}`);
    this.name = 'ProfileNotFoundError';
  }
}

/** A routing profile with that identifier already exists. */
export class ProfileExistsError extends AdminError {
  constructor(workspaceId: string, identifier: string) {
    super('profile_exists', `profile ${identifier} already exists in workspace ${workspaceId}`);
    this.name = 'ProfileExistsError';
  }
}

/** The profile is the workspace default route, so deleting it would break `sluice/auto`. */
export class ProfileInUseError extends AdminError {
  constructor(identifier: string) {
    super('profile_in_use', `profile ${identifier} is the workspace default route; clear or change the default first`);
    this.name = 'ProfileInUseError';
  }
}

/** The provider is not in the imported catalog. */
export class ProviderNotFoundError extends AdminError {
  constructor(provider: string) {
    super('provider_not_found', `provider ${provider} is not in the catalog; run \`sluice catalog import\` first`);
    this.name = 'ProviderNotFoundError';
  }
}

/** The workspace holds no key of its own for that provider. */
export class ByokNotSetError extends AdminError {
  constructor(workspaceId: string, provider: string) {
    super('byok_not_set', `workspace ${workspaceId} holds no key of its own for ${provider}`);
    this.name = 'ByokNotSetError';
  }
}

/** The operation needs a secret store and the context carries none. */
export class SecretStoreMissingError extends AdminError {
  constructor() {
    super('secret_store_missing', 'this operation needs a secret store and none is configured');
    this.name = 'SecretStoreMissingError';
  }
}

/** A catalog or provider entry failed validation: defined with the catalog, under `lambdas/catalog/`. */
export { CatalogValidationError } from '../catalog/errors';

/** Concurrent writers kept winning; the operation gave up rather than loop forever. */
export class ConcurrentUpdateError extends AdminError {
  constructor(what: string) {
    super('concurrent_update', `${what} kept changing underneath this operation; try again`);
    this.name = 'ConcurrentUpdateError';
  }
}

/** The local stage has no state file: local mode is not running. */
export class LocalStageNotRunningError extends AdminError {
  constructor(path: string) {
    super('local_not_running', `no local stage found at ${path}: run npm start first`);
    this.name = 'LocalStageNotRunningError';
  }
}

/** A credit reference already credited a different amount; a reference names one top-up. */
export class ReferenceUsedError extends AdminError {
  constructor(reference: string, originalMicros: number, at: number) {
    super(
      'reference_used',
      `reference ${reference} already credited ${formatMoney(originalMicros)} on ${new Date(at).toISOString()}; a reference credits once`,
    );
    this.name = 'ReferenceUsedError';
  }
}

/** An adjustment would take the balance below zero or below what is held for running requests. */
export class BelowHeldError extends AdminError {
  constructor(message: string) {
    super('below_held', message);
    this.name = 'BelowHeldError';
  }
}

/** A model id that is in no catalog; the message names the closest catalogued id. */
export class ModelNotInCatalogError extends AdminError {
  constructor(id: string, closest: string | undefined) {
    super('model_not_in_catalog', `${id} is in no catalog${closest === undefined ? '' : `; did you mean ${closest}?`}`);
    this.name = 'ModelNotInCatalogError';
  }
}

/** No usage row of that request was found in the range read. */
export class UsageNotFoundError extends AdminError {
  constructor(requestId: string) {
    super('usage_not_found', `no usage row of request ${requestId} in the range read; widen it with --since`);
    this.name = 'UsageNotFoundError';
  }
}

/**
 * A change that writes the stage's home region's ledger items (a limit's arming, the slice count),
 * refused while the configuration home is another region: only the home region writes its items
 * (docs/regions.md, "Configuration"), and this region's own items would not be what its gateways
 * or the home's read for it.
 */
export class HomeRegionRequiredError extends AdminError {
  constructor(what: string, homeRegion: string, configurationHome: string) {
    super(
      'home_region_required',
      `${what} writes the home region's (${homeRegion}) ledger items, which only ${homeRegion} writes; refused while the configuration home is ${configurationHome}. Make it again once the configuration home is back in ${homeRegion} (sluice stage config-home ${homeRegion})`,
    );
    this.name = 'HomeRegionRequiredError';
  }
}

/** A move of the configuration home the management API cannot make (one region, or another region's API asked). */
export class ConfigHomeMoveError extends AdminError {
  constructor(code: 'nothing_to_move' | 'invalid_argument', message: string) {
    super(code, message);
    this.name = 'ConfigHomeMoveError';
  }
}

/**
 * Resolution of a model reference against the catalog, the workspace's routing profiles and its
 * permitted set, into the ordered list of models a request may be served by.
 */
import { SluiceError } from '../core/errors';
import type { ModelRef } from '../core/model-id';
import type { CatalogModel, ProviderConfig } from '../shared/catalog-types';
import type { WorkspaceRecord } from '../shared/records';
import { guarded } from './faults';
import type { Catalog, WorkspaceDirectory } from './ports';
import type { FamilyRules } from './routes';

/** One model a request may be served by, with the provider that serves it. */
export interface Candidate {
  readonly model: CatalogModel;
  readonly provider: ProviderConfig;
  /** Secret name of the workspace's own key for this provider (BYOK), when it has one. */
  readonly byokSecret?: string;
}

export interface Resolution {
  /** The caller named a route (a profile or `sluice/auto`), not one model. */
  readonly route: boolean;
  readonly candidates: readonly Candidate[];
}

/** Wraps a store read so its fault is logged by kind and becomes SPEC's 503 for that store. */
function readOr<T>(requestId: string, read: () => Promise<T>, kind: 'model_pricing_unreadable' | 'model_permissions_unreadable'): Promise<T> {
  return guarded(
    requestId,
    'resolve',
    read,
    () =>
      new SluiceError(kind, kind === 'model_pricing_unreadable' ? 'The model catalog cannot be read right now; try again shortly.' : 'The workspace settings cannot be read right now; try again shortly.'),
  );
}

/** SPEC's three `model_not_available` messages, plus the endpoint case. */
export function unavailableError(model: CatalogModel, rules: FamilyRules): SluiceError | undefined {
  switch (model.status) {
    case 'retired':
      return new SluiceError(
        'model_not_available',
        `The provider has retired ${model.id}; neither retrying nor changing the request will reach it.` +
          (model.replacement ? ` The provider names ${model.replacement} as its replacement.` : ' Pick another model.'),
      );
    case 'unreachable':
      return new SluiceError(
        'model_not_available',
        `The provider still serves ${model.id}, but Sluice cannot reach it right now. Nothing about the request is wrong; retry later.`,
      );
    case 'not_served':
      return new SluiceError('model_not_available', `${model.id} is known but not served at the moment; retrying later is worth more than changing the request.`);
    case 'served':
      break;
  }
  if (!model.endpointFamilies.includes(rules.family)) {
    return new SluiceError('model_not_available', `${model.id} is not offered on ${rules.path}.`);
  }
  return undefined;
}

function permitted(workspace: WorkspaceRecord, id: string): boolean {
  return workspace.permittedModels === undefined || workspace.permittedModels.includes(id);
}

async function pinned(requestId: string, catalog: Catalog, id: string, providerName: string): Promise<{ model: CatalogModel; provider: ProviderConfig } | undefined> {
  const [provider, model] = await readOr(requestId, () => Promise.all([catalog.provider(providerName), catalog.model(id)]), 'model_pricing_unreadable');
  return provider === undefined || model === undefined || model.provider !== provider.name ? undefined : { model, provider };
}

/**
 * Resolves `ref` for `family`. Order of refusals: unknown (404 `model_not_found`), not available
 * (404 `model_not_available`, whose message says why), not permitted (403).
 */
export async function resolveModel(
  requestId: string,
  ref: ModelRef,
  rules: FamilyRules,
  workspace: WorkspaceRecord,
  catalog: Catalog,
  directory: WorkspaceDirectory,
): Promise<Resolution> {
  const candidate = (m: { model: CatalogModel; provider: ProviderConfig }): Candidate => {
    const byokSecret = workspace.byok?.[m.provider.name];
    return byokSecret === undefined ? m : { ...m, byokSecret };
  };
  if (ref.kind === 'pinned') {
    const found = await pinned(requestId, catalog, ref.id, ref.provider);
    if (found === undefined) {
      throw new SluiceError('model_not_found', `The model '${ref.id}' does not exist in the catalog. GET /v1/models lists the ids you can call.`);
    }
    const unavailable = unavailableError(found.model, rules);
    if (unavailable) throw unavailable;
    if (!permitted(workspace, ref.id)) {
      throw new SluiceError('model_not_permitted', `This workspace's permitted models exclude ${ref.id}. A workspace owner must widen the set.`);
    }
    return { route: false, candidates: [candidate(found)] };
  }
  let identifier: string;
  if (ref.kind === 'auto') {
    if (workspace.defaultProfile === undefined) {
      throw new SluiceError('model_not_available', 'This workspace has no default route, so sluice/auto names nothing. A workspace owner can set one.');
    }
    identifier = workspace.defaultProfile;
  } else {
    identifier = ref.identifier;
  }
  const profile = await readOr(requestId, () => directory.profile(workspace.workspaceId, identifier), 'model_permissions_unreadable');
  if (profile === undefined) {
    throw new SluiceError('model_not_found', `This workspace has no routing profile 'profile/${identifier}'.`);
  }
  const servable: Candidate[] = [];
  let firstUnavailable: SluiceError | undefined;
  for (const id of profile.models) {
    const slash = id.indexOf('/');
    const found = slash > 0 ? await pinned(requestId, catalog, id, id.slice(0, slash)) : undefined;
    if (found === undefined) continue;
    const unavailable = unavailableError(found.model, rules);
    if (unavailable) {
      firstUnavailable ??= unavailable;
      continue;
    }
    servable.push(candidate(found));
  }
  if (servable.length === 0) {
    throw firstUnavailable ?? new SluiceError('model_not_available', `No model of profile/${identifier} can be served on this endpoint right now.`);
  }
  const allowed = servable.filter((c) => permitted(workspace, c.model.id));
  if (allowed.length === 0) {
    throw new SluiceError('model_not_permitted', `This workspace's permitted models exclude every model of profile/${identifier}. A workspace owner must widen the set.`);
  }
  return { route: true, candidates: allowed };
}

/**
 * The two GET routes: the list of what the key can call, and one catalogued model. They pass the
 * same door as a completion up to the pause and hold nothing.
 */
import { SluiceError } from '../core/errors';
import type { CatalogModel, ProviderConfig } from '../shared/catalog-types';
import type { Caller } from './authenticate';
import { catalogEntry, modelDetail } from './catalog-view';
import { guarded } from './faults';
import type { RequestContext, Served } from './ports';
import { serviceKeyAvailable } from './providers';
import { requestIdHeaders } from './respond';

const unreadable = (): SluiceError => new SluiceError('model_pricing_unreadable', 'The model catalog cannot be read right now; try again shortly.');

/** GET /v1/models: models served now, whose provider has a key, within the permitted set. */
export async function listModels(ctx: RequestContext, caller: Caller): Promise<Served> {
  const { catalog } = ctx.deps;
  const [models, providers] = await guarded(
    ctx.requestId,
    'models',
    (): Promise<[readonly CatalogModel[], readonly ProviderConfig[]]> => Promise.all([catalog.models(), catalog.providers()]),
    unreadable,
  );
  const usable = new Set<string>();
  for (const p of providers) {
    if (caller.workspace.byok?.[p.name] !== undefined || (await serviceKeyAvailable(p, ctx.deps))) usable.add(p.name);
  }
  if (usable.size === 0) throw new SluiceError('no_provider_configured', 'No model provider is configured for this service.');
  const permittedSet = caller.workspace.permittedModels;
  const data = models
    .filter((m) => m.status === 'served' && usable.has(m.provider) && (permittedSet === undefined || permittedSet.includes(m.id)))
    .map(catalogEntry);
  return sendJson(ctx, 200, { object: 'list', data });
}

/** GET /v1/models/{id}: any catalogued model, served or not, permitted or not. */
export async function readModel(ctx: RequestContext, id: string): Promise<Served> {
  const model = await guarded(ctx.requestId, 'models', () => ctx.deps.catalog.model(id), unreadable);
  if (model === undefined) throw new SluiceError('model_not_found', `The model '${id}' does not exist in the catalog.`);
  return sendJson(ctx, 200, modelDetail(model));
}

async function sendJson(ctx: RequestContext, status: number, body: unknown): Promise<Served> {
  ctx.sink.start(status, { 'content-type': 'application/json', ...requestIdHeaders(ctx.requestId) });
  await ctx.sink.write(Buffer.from(JSON.stringify(body)));
  await ctx.sink.end();
  return { status };
}

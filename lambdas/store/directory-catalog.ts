/**
 * The management API's catalog: the import (validated and written exactly as the deploy-time
 * import does it, through `lambdas/catalog/import.ts`; pruned only when asked), reading it back,
 * the check that refuses ids in no catalog, and providers and models added and removed one at a
 * time at run time (`sluice provider add`, `sluice model add`).
 *
 * A run-time provider's key goes to the secret store (Secrets Manager deployed, the 0600 file
 * locally) under `sluice/<stage>/added-providers/<name>`; the catalog item names only the secret.
 */
import { ConditionalCheckFailedException, TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, GetCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { CatalogModel, ProviderConfig } from '../shared/catalog-types';
import { addedProviderSecretPrefix, modelFromInput, providerFromInput, type ModelInput, type ProviderInput } from '../catalog/added';
import { scanCatalog, writeCatalogEntries, type CatalogTable, type ImportOptions, type ImportResult } from '../catalog/import';
import { MODEL_PK_PREFIX, catalogItemToModel, catalogItemToProvider, modelPk, modelToItem, providerPk, providerToItem } from '../catalog/items';
import { closestId } from '../core/closest-id';
import type { AdminContext } from './directory-context';
import { nowOf, table } from './directory-context';
import { AdminError, ModelNotInCatalogError, ProviderNotFoundError, SecretStoreMissingError, ValidationError } from './directory-errors';

/** A provider of that name is already in the catalog. */
export class ProviderExistsError extends AdminError {
  constructor(name: string) {
    super('provider_exists', `provider ${name} is already in the catalog; remove it first (sluice provider remove ${name}) to change it`);
    this.name = 'ProviderExistsError';
  }
}

/** A model of that id is already in the catalog. */
export class ModelExistsError extends AdminError {
  constructor(id: string) {
    super('model_exists', `model ${id} is already in the catalog; remove it first (sluice model remove ${id}) to change it`);
    this.name = 'ModelExistsError';
  }
}

/** A provider still has models in the catalog. */
export class ProviderInUseError extends AdminError {
  constructor(name: string, models: readonly string[]) {
    super('provider_in_use', `provider ${name} still serves ${models.length} catalogued model(s) (${models.slice(0, 5).join(', ')}${models.length > 5 ? ', …' : ''}); remove them first`);
    this.name = 'ProviderInUseError';
  }
}

function catalogTable(ctx: AdminContext): CatalogTable {
  return { doc: ctx.doc, tableName: table(ctx, 'catalog') };
}

/**
 * Writes validated entries (see `parseCatalogEntries`); what the table holds beyond them is named
 * in the result and removed only with `prune`.
 */
export async function writeCatalog(
  ctx: AdminContext,
  entries: { readonly providers: readonly ProviderConfig[]; readonly models: readonly CatalogModel[] },
  options: ImportOptions = {},
): Promise<ImportResult> {
  const before = options.prune === true ? (await readCatalog(ctx)).providers : [];
  const out = await writeCatalogEntries(catalogTable(ctx), { providers: [...entries.providers], models: [...entries.models] }, options);
  // A pruned provider that was added at run time leaves no key behind (after its item is gone,
  // so the gateway never follows a name to a secret that is gone).
  for (const name of out.pruned ? out.unlisted.providers : []) {
    const provider = before.find((p) => p.name === name);
    const secretName = provider === undefined || provider.keySource === 'none' ? undefined : provider.keySource.secretName.split('{stage}').join(ctx.stage);
    if (secretName !== undefined && isAddedProviderSecret(ctx, secretName)) await ctx.secrets?.delete(secretName);
  }
  return out;
}

/** Reads the whole catalog table back through the same readers the gateway uses. */
export async function readCatalog(ctx: AdminContext): Promise<{ providers: ProviderConfig[]; models: CatalogModel[] }> {
  const items = await scanCatalog(catalogTable(ctx));
  const providers = items.filter((i) => i['kind'] === 'provider').map(catalogItemToProvider);
  const models = items.filter((i) => i['kind'] === 'model').map(catalogItemToModel);
  providers.sort((a, b) => a.name.localeCompare(b.name));
  models.sort((a, b) => a.id.localeCompare(b.id));
  return { providers, models };
}

/**
 * Refuses ids that are in no catalog, naming the closest catalogued id. Reads the catalog
 * table, so a model imported a moment ago counts.
 */
export async function requireCatalogued(ctx: AdminContext, ids: readonly string[]): Promise<void> {
  const known = (await scanCatalog(catalogTable(ctx))).filter((i) => i['kind'] === 'model').map((i) => String(i['pk']).slice(MODEL_PK_PREFIX.length));
  const set = new Set(known);
  for (const id of ids) if (!set.has(id)) throw new ModelNotInCatalogError(id, closestId(id, known));
}

async function getProvider(ctx: AdminContext, name: string): Promise<ProviderConfig | undefined> {
  const out = await ctx.doc.send(new GetCommand({ TableName: table(ctx, 'catalog'), Key: { pk: providerPk(name) }, ConsistentRead: true }));
  return out.Item === undefined ? undefined : catalogItemToProvider(out.Item);
}

/** Whether a secret name is one `addProvider` wrote (never a file provider's, which deploys own). */
function isAddedProviderSecret(ctx: AdminContext, secretName: string): boolean {
  return secretName.startsWith(addedProviderSecretPrefix(ctx.stage));
}

/** A provider key as pasted: one token, no spaces or line breaks (as for a workspace's own key). */
function checkProviderKey(apiKey: string): string {
  const key = apiKey.trim();
  if (key.length === 0 || key.length > 4096 || /\s/.test(key)) {
    throw new ValidationError('the provider key must be one non-empty token with no spaces or line breaks');
  }
  return key;
}

/**
 * Adds a provider account. Validated like a file's entry (name, URL, auth, families); refused
 * when the name is taken. A provider that takes a key needs `apiKey`, which goes to the secret
 * store first, so the catalog never names a secret that does not exist; a keyless one refuses a key.
 */
export async function addProvider(ctx: AdminContext, input: ProviderInput & { readonly apiKey?: string }): Promise<ProviderConfig> {
  const provider = providerFromInput(input);
  const keySource = provider.keySource;
  if (keySource === 'none' && input.apiKey !== undefined) throw new ValidationError('a provider added with auth none takes no key');
  if (keySource !== 'none' && input.apiKey === undefined) throw new ValidationError(`provider ${provider.name} needs its API key (or auth none)`);
  if ((await getProvider(ctx, provider.name)) !== undefined) throw new ProviderExistsError(provider.name);
  if (keySource !== 'none') {
    if (ctx.secrets === undefined) throw new SecretStoreMissingError();
    await ctx.secrets.put(keySource.secretName.split('{stage}').join(ctx.stage), checkProviderKey(input.apiKey ?? ''));
  }
  try {
    await ctx.doc.send(
      new PutCommand({ TableName: table(ctx, 'catalog'), Item: providerToItem(provider), ConditionExpression: 'attribute_not_exists(pk)' }),
    );
  } catch (err) {
    // Another add of the same name won the race in between; its secret stays (it may be its own).
    if (err instanceof ConditionalCheckFailedException) throw new ProviderExistsError(provider.name);
    throw err;
  }
  return provider;
}

/**
 * Removes a provider account, refused while catalogued models name it. A key `addProvider`
 * stored is deleted after the item, so the gateway never follows a name to a secret that is gone.
 */
export async function removeProvider(ctx: AdminContext, name: string): Promise<{ provider: string; secretDeleted: boolean }> {
  const provider = await getProvider(ctx, name);
  if (provider === undefined) throw new ProviderNotFoundError(name);
  const { models } = await readCatalog(ctx);
  const serving = models.filter((m) => m.provider === name).map((m) => m.id);
  if (serving.length > 0) throw new ProviderInUseError(name, serving);
  try {
    await ctx.doc.send(new DeleteCommand({ TableName: table(ctx, 'catalog'), Key: { pk: providerPk(name) }, ConditionExpression: 'attribute_exists(pk)' }));
  } catch (err) {
    if (err instanceof ConditionalCheckFailedException) throw new ProviderNotFoundError(name);
    throw err;
  }
  const secretName = provider.keySource === 'none' ? undefined : provider.keySource.secretName.split('{stage}').join(ctx.stage);
  if (secretName === undefined || !isAddedProviderSecret(ctx, secretName) || ctx.secrets === undefined) return { provider: name, secretDeleted: false };
  await ctx.secrets.delete(secretName);
  return { provider: name, secretDeleted: true };
}

/** The catalog's one currency (every model shares it: one balance per workspace), if any model is catalogued. */
function catalogCurrency(models: readonly CatalogModel[]): string | undefined {
  return models[0]?.currencyCode;
}

/**
 * Adds a model of a catalogued provider. Validated like a file's entry (id, rates, limits); the
 * provider must exist and serve the model's families, and the currency must be the catalog's.
 * One transaction: the model is written only if its id is free and its provider still exists.
 */
export async function addModel(ctx: AdminContext, input: Omit<ModelInput, 'currencyCode'> & { readonly currencyCode?: string }): Promise<CatalogModel> {
  const slash = input.id.indexOf('/');
  const providerName = slash <= 0 ? undefined : input.id.slice(0, slash);
  if (providerName === undefined) throw new ValidationError(`model id ${JSON.stringify(input.id)} must be pinned as <provider>/<model>`);
  const provider = await getProvider(ctx, providerName);
  if (provider === undefined) throw new ProviderNotFoundError(providerName);
  const { models } = await readCatalog(ctx);
  const currency = catalogCurrency(models);
  if (input.currencyCode !== undefined && currency !== undefined && input.currencyCode !== currency) {
    throw new ValidationError(`the catalog charges in ${currency}; a model priced in ${input.currencyCode} cannot be charged to a workspace's balance`);
  }
  const currencyCode = input.currencyCode ?? currency;
  if (currencyCode === undefined) throw new ValidationError('the catalog is empty: give the currency of the prices');
  const model = modelFromInput({ ...input, currencyCode }, provider, nowOf(ctx));
  if (models.some((m) => m.id === model.id)) throw new ModelExistsError(model.id);
  try {
    await ctx.doc.send(
      new TransactWriteCommand({
        TransactItems: [
          { ConditionCheck: { TableName: table(ctx, 'catalog'), Key: { pk: providerPk(provider.name) }, ConditionExpression: 'attribute_exists(pk)' } },
          { Put: { TableName: table(ctx, 'catalog'), Item: modelToItem(model), ConditionExpression: 'attribute_not_exists(pk)' } },
        ],
      }),
    );
  } catch (err) {
    if (err instanceof TransactionCanceledException) {
      const [providerReason, modelReason] = err.CancellationReasons ?? [];
      if (providerReason?.Code === 'ConditionalCheckFailed') throw new ProviderNotFoundError(provider.name);
      if (modelReason?.Code === 'ConditionalCheckFailed') throw new ModelExistsError(model.id);
    }
    throw err;
  }
  return model;
}

/** Removes a model from the catalog (profiles and permitted sets naming it then refuse it as in no catalog). */
export async function removeModel(ctx: AdminContext, id: string): Promise<{ model: string }> {
  try {
    await ctx.doc.send(new DeleteCommand({ TableName: table(ctx, 'catalog'), Key: { pk: modelPk(id) }, ConditionExpression: 'attribute_exists(pk)' }));
  } catch (err) {
    if (err instanceof ConditionalCheckFailedException) {
      const { models } = await readCatalog(ctx);
      throw new ModelNotInCatalogError(id, closestId(id, models.map((m) => m.id)));
    }
    throw err;
  }
  return { model: id };
}

/**
 * Bring your own key: a workspace's own provider key lives in the secret store, and the
 * workspace records only the secret's name. No table ever holds the key itself.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { AdminContext } from './directory-context';
import { table } from './directory-context';
import {
  AdminError,
  ByokNotSetError,
  ConcurrentUpdateError,
  ProviderNotFoundError,
  SecretStoreMissingError,
  ValidationError,
} from './directory-errors';
import type { SecretStore } from './directory-secrets';
import { byokSecretName } from './directory-secrets';
import { providerPk } from '../catalog/items';
import { isProviderName } from './directory-validate';
import { requireWorkspace, updateMeta } from './directory-common';

function secretsOf(ctx: AdminContext): SecretStore {
  if (ctx.secrets === undefined) throw new SecretStoreMissingError();
  return ctx.secrets;
}

/** Raised when the `byok` map appeared or vanished between the read and the write. */
class ByokMapMovedError extends AdminError {
  constructor() {
    super('concurrent_update', 'byok map moved');
  }
}

/**
 * Stores a workspace's own key for a provider and records the secret's name on the workspace.
 * The secret is written first, so the workspace never names a secret that does not exist.
 */
export async function setByokKey(
  ctx: AdminContext,
  input: { workspaceId: string; provider: string; apiKey: string },
): Promise<{ provider: string; secretName: string }> {
  const secrets = secretsOf(ctx);
  if (!isProviderName(input.provider)) throw new ValidationError(`${JSON.stringify(input.provider)} is not a provider name`);
  const apiKey = input.apiKey.trim();
  // A key with whitespace inside is a paste accident (two keys, a stray newline), not a key.
  if (apiKey.length === 0 || apiKey.length > 4096 || /\s/.test(apiKey)) {
    throw new ValidationError('the provider key must be one non-empty token with no spaces or line breaks');
  }
  const provider = await ctx.doc.send(
    new GetCommand({ TableName: table(ctx, 'catalog'), Key: { pk: providerPk(input.provider) }, ConsistentRead: true }),
  );
  if (provider.Item === undefined) throw new ProviderNotFoundError(input.provider);
  let ws = await requireWorkspace(ctx, input.workspaceId);
  const secretName = byokSecretName(ctx.stage, ws.workspaceId, input.provider);
  await secrets.put(secretName, apiKey);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      // A nested path can only be set inside a map that exists, and a map cannot be created and
      // entered in one expression: create it whole the first time, set one entry afterwards.
      await updateMeta(
        ctx,
        ws.workspaceId,
        ws.byok === undefined
          ? { expression: 'SET byok = :map', values: { ':map': { [input.provider]: secretName } }, condition: 'attribute_not_exists(byok)' }
          : {
              expression: 'SET byok.#p = :name',
              names: { '#p': input.provider },
              values: { ':name': secretName },
              condition: 'attribute_exists(byok)',
            },
        () => new ByokMapMovedError(),
      );
      return { provider: input.provider, secretName };
    } catch (err) {
      if (!(err instanceof ByokMapMovedError)) throw err;
      ws = await requireWorkspace(ctx, input.workspaceId);
    }
  }
  throw new ConcurrentUpdateError(`the byok settings of workspace ${input.workspaceId}`);
}

/**
 * Removes a workspace's own key for a provider. The workspace stops naming the secret first and
 * the secret is deleted after, so the gateway never follows a name to a secret that is gone.
 */
export async function removeByokKey(
  ctx: AdminContext,
  input: { workspaceId: string; provider: string },
): Promise<{ provider: string; secretName: string }> {
  const secrets = secretsOf(ctx);
  const ws = await requireWorkspace(ctx, input.workspaceId);
  const secretName = ws.byok?.[input.provider];
  if (secretName === undefined) throw new ByokNotSetError(input.workspaceId, input.provider);
  await updateMeta(
    ctx,
    ws.workspaceId,
    { expression: 'REMOVE byok.#p', names: { '#p': input.provider }, condition: 'attribute_exists(byok.#p)' },
    () => new ByokNotSetError(input.workspaceId, input.provider),
  );
  await secrets.delete(secretName);
  return { provider: input.provider, secretName };
}

/** The providers for which a workspace holds its own key: names only, never a key or a secret value. */
export async function listByokProviders(ctx: AdminContext, input: { workspaceId: string }): Promise<{ providers: string[] }> {
  const ws = await requireWorkspace(ctx, input.workspaceId);
  return { providers: Object.keys(ws.byok ?? {}).sort() };
}

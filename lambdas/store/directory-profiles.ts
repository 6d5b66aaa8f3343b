/**
 * Routing profiles: an ordered list of pinned model ids, addressed as `profile/<identifier>`.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { ProfileRecord } from '../shared/records';
import type { AdminContext } from './directory-context';
import { META, conditional, failedAt, profileSk, table, transact } from './directory-context';
import { ProfileExistsError, ProfileInUseError, ProfileNotFoundError, ValidationError, WorkspaceNotFoundError } from './directory-errors';
import { checkProfileIdentifier, parsePinnedId } from './directory-validate';
import { checkWorkspaceId, getWorkspace, listProfileRecords } from './directory-common';
import { requireCatalogued } from './directory-catalog';

/** Most models one profile may list; each is one attempt, and a chain this long is a mistake. */
export const PROFILE_MAX_MODELS = 16;

function checkModels(models: readonly string[]): string[] {
  if (models.length === 0) throw new ValidationError('a profile lists at least one provider/model id');
  if (models.length > PROFILE_MAX_MODELS) throw new ValidationError(`a profile lists at most ${PROFILE_MAX_MODELS} models`);
  for (const id of models) parsePinnedId(id, 'profile model');
  if (new Set(models).size !== models.length) throw new ValidationError('a profile lists each model once');
  return [...models];
}

/** Creates a profile; every entry must be a pinned `provider/model` id, in the customer's order. */
export async function createProfile(
  ctx: AdminContext,
  input: { workspaceId: string; identifier: string; models: readonly string[] },
): Promise<{ identifier: string; slug: string; models: string[] }> {
  checkWorkspaceId(input.workspaceId);
  const identifier = checkProfileIdentifier(input.identifier);
  const models = checkModels(input.models);
  await requireCatalogued(ctx, models);
  const profile: ProfileRecord = { pk: input.workspaceId, sk: profileSk(identifier), workspaceId: input.workspaceId, identifier, models };
  await transact(
    ctx,
    [
      {
        ConditionCheck: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: input.workspaceId, sk: META },
          ConditionExpression: 'attribute_exists(pk)',
        },
      },
      { Put: { TableName: table(ctx, 'workspaces'), Item: profile, ConditionExpression: 'attribute_not_exists(pk)' } },
    ],
    (reasons) => {
      if (failedAt(reasons, 0)) return new WorkspaceNotFoundError(input.workspaceId);
      if (failedAt(reasons, 1)) return new ProfileExistsError(input.workspaceId, identifier);
      return undefined;
    },
  );
  return { identifier, slug: `profile/${identifier}`, models };
}

/**
 * Puts a profile's models in a new order. The new list must hold exactly the same models; the
 * write is conditional on the list not having changed since it was read.
 */
export async function reorderProfile(
  ctx: AdminContext,
  input: { workspaceId: string; identifier: string; models: readonly string[] },
): Promise<{ identifier: string; models: string[] }> {
  checkWorkspaceId(input.workspaceId);
  const identifier = checkProfileIdentifier(input.identifier);
  const models = checkModels(input.models);
  const got = await ctx.doc.send(
    new GetCommand({ TableName: table(ctx, 'workspaces'), Key: { pk: input.workspaceId, sk: profileSk(identifier) }, ConsistentRead: true }),
  );
  const current = got.Item as ProfileRecord | undefined;
  if (current === undefined) throw new ProfileNotFoundError(input.workspaceId, identifier);
  const before = [...current.models].sort();
  const after = [...models].sort();
  if (before.length !== after.length || before.some((m, i) => m !== after[i])) {
    throw new ValidationError(`a reorder lists exactly the profile's models: ${current.models.join(' ')}`);
  }
  await conditional(
    () =>
      ctx.doc.send(
        new UpdateCommand({
          TableName: table(ctx, 'workspaces'),
          Key: { pk: input.workspaceId, sk: profileSk(identifier) },
          UpdateExpression: 'SET models = :new',
          ConditionExpression: 'attribute_exists(pk) AND models = :old',
          ExpressionAttributeValues: { ':new': models, ':old': current.models },
        }),
      ),
    () => new ValidationError(`profile ${identifier} changed while reordering; read it again and retry`),
  );
  return { identifier, models };
}

/** Deletes a profile, unless it is the default route (`sluice/auto` would then name nothing). */
export async function deleteProfile(ctx: AdminContext, input: { workspaceId: string; identifier: string }): Promise<{ identifier: string }> {
  checkWorkspaceId(input.workspaceId);
  const identifier = checkProfileIdentifier(input.identifier);
  await transact(
    ctx,
    [
      {
        ConditionCheck: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: input.workspaceId, sk: META },
          ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(defaultProfile) OR defaultProfile <> :id)',
          ExpressionAttributeValues: { ':id': identifier },
        },
      },
      {
        Delete: {
          TableName: table(ctx, 'workspaces'),
          Key: { pk: input.workspaceId, sk: profileSk(identifier) },
          ConditionExpression: 'attribute_exists(pk)',
        },
      },
    ],
    async (reasons) => {
      if (failedAt(reasons, 0)) {
        return (await getWorkspace(ctx, input.workspaceId)) === undefined
          ? new WorkspaceNotFoundError(input.workspaceId)
          : new ProfileInUseError(identifier);
      }
      if (failedAt(reasons, 1)) return new ProfileNotFoundError(input.workspaceId, identifier);
      return undefined;
    },
  );
  return { identifier };
}

/** The workspace's profiles, with which one is the default route. */
export async function listProfiles(
  ctx: AdminContext,
  input: { workspaceId: string },
): Promise<{ identifier: string; slug: string; models: string[]; isDefault: boolean }[]> {
  checkWorkspaceId(input.workspaceId);
  const ws = await getWorkspace(ctx, input.workspaceId);
  if (ws === undefined) throw new WorkspaceNotFoundError(input.workspaceId);
  const profiles = await listProfileRecords(ctx, input.workspaceId);
  return profiles.map((p) => ({
    identifier: p.identifier,
    slug: `profile/${p.identifier}`,
    models: [...p.models],
    isDefault: ws.defaultProfile === p.identifier,
  }));
}

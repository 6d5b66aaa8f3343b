/**
 * Credit top-ups. The platform fee is taken when credit is bought (SPEC), outside Sluice, so what
 * arrives here is the amount the workspace may spend at face value.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { BalanceRecord } from '../../lambdas/shared/records';
import type { AdminContext } from '../context';
import { BALANCE, conditional, ledgerPk, table } from '../context';
import { ValidationError, WorkspaceNotFoundError } from '../errors';
import { minorToMicros } from '../validate';
import { checkWorkspaceId, getWorkspace } from './common';

/**
 * Adds `minor` minor units to the balance: `available` and `credited` grow by the same micros in
 * one conditional update, so `available + held + spent = credited` keeps holding.
 */
export async function addCredit(ctx: AdminContext, input: { workspaceId: string; minor: number }): Promise<{ availableMicros: number }> {
  checkWorkspaceId(input.workspaceId);
  const micros = minorToMicros(input.minor, 'credit');
  const out = await conditional(
    () =>
      ctx.doc.send(
        new UpdateCommand({
          TableName: table(ctx, 'ledger'),
          Key: { pk: ledgerPk(input.workspaceId), sk: BALANCE },
          UpdateExpression: 'ADD availableMicros :m, creditedMicros :m',
          // The balance item exists only for a created workspace. The ceiling keeps every ledger
          // figure (each at most `credited`) an exact JavaScript integer when read back.
          ConditionExpression: 'attribute_exists(pk) AND creditedMicros <= :ceiling',
          ExpressionAttributeValues: { ':m': micros, ':ceiling': Number.MAX_SAFE_INTEGER - micros },
          ReturnValues: 'ALL_NEW',
        }),
      ),
    async () =>
      (await getWorkspace(ctx, input.workspaceId)) === undefined
        ? new WorkspaceNotFoundError(input.workspaceId)
        : new ValidationError('that credit would take the balance beyond what Sluice can count exactly'),
  );
  const balance = out.Attributes as BalanceRecord;
  return { availableMicros: balance.availableMicros };
}

import { Duration, Stack, Validations } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/config';
import type { ProviderSecrets } from './secrets';
import { addedProviderSecretPrefix } from '../lambdas/catalog/added';
import { SluiceFunction } from './sluice-function';
import type { StageSettings } from './stage';
import type { SluiceTables } from './tables';

/** Properties of {@link AdminApi}. */
export interface AdminApiProps {
  /** The stage's settings (name, table prefix, log retention). */
  readonly stage: StageSettings;
  /** The stage's tables. */
  readonly tables: SluiceTables;
  /** Where the BYOK secrets live; the API creates, updates and deletes them under its prefix. */
  readonly secrets: ProviderSecrets;
  /**
   * Handler file, relative to the repository root.
   * @default 'lambdas/admin/handler.ts'
   */
  readonly entry?: string;
}

/**
 * The management API (`/admin/v1/…`): the operator CLI's only way in. Its Function URL has auth
 * `AWS_IAM`, so AWS checks each caller's SigV4 signature and `lambda:InvokeFunctionUrl`
 * permission before the function runs, and passes the caller's principal, which the audit trail
 * records. Nobody is granted that permission here: operators get it through their own IAM.
 *
 * Its role reaches only what the use cases need: read/write on workspaces, keys, ledger and
 * catalog (settings, keys, balance and statement, the catalog import); put, get and query on the
 * audit table (no update or delete: the trail is append-only); read on usage and rollups
 * (reports); nothing on holds; no table management; create, update, restore and delete of
 * secrets under the stage's BYOK and added-providers prefixes only, and no provider secret of the files.
 */
export class AdminApi extends Construct {
  /** The management function. */
  public readonly fn: lambda.Function;
  /** Its Function URL (IAM auth). */
  public readonly url: lambda.FunctionUrl;

  public constructor(scope: Construct, id: string, props: AdminApiProps) {
    super(scope, id);
    const { stage, tables } = props;
    this.fn = new SluiceFunction(this, 'Admin', {
      stage,
      entry: props.entry ?? 'lambdas/admin/handler.ts',
      description: `Sluice ${stage.name}: management API (IAM auth, audited)`,
      memoryMb: stage.workerMemoryMb,
      timeout: Duration.seconds(60),
      environment: { [ENV.secretSource]: 'secrets-manager' },
    }).fn;

    this.url = this.fn.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.AWS_IAM });

    for (const name of ['workspaces', 'keys', 'ledger', 'catalog'] as const) tables.table(name).grantReadWriteData(this.fn);
    for (const name of ['usage', 'rollups'] as const) tables.table(name).grantReadData(this.fn);
    const audit = tables.table('audit');
    audit.grant(this.fn, 'dynamodb:PutItem', 'dynamodb:GetItem', 'dynamodb:Query');
    this.fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:Query'],
        resources: [`${audit.tableArn}/index/*`],
      }),
    );
    this.fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: [
          'secretsmanager:CreateSecret',
          'secretsmanager:PutSecretValue',
          'secretsmanager:RestoreSecret',
          'secretsmanager:DeleteSecret',
          'secretsmanager:DescribeSecret',
        ],
        // BYOK keys and the keys of providers added at run time: both are created by this API.
        resources: props.secrets.runtimeArnPatterns,
      }),
    );

    // cdk-nag (lib/nag.ts): the two wildcards are decisions, acknowledged on this construct only.
    const auditId = Stack.of(this).getLogicalId(audit.node.defaultChild as dynamodb.CfnTable);
    Validations.of(this).acknowledge(
      {
        id: `AwsSolutions-IAM5[Resource::<${auditId}.Arn>/index/*]`,
        reason: "Lists the audit trail by day through the audit table's own index; the wildcard covers index names of that one table only.",
      },
      {
        id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:${stage.byokSecretPrefix}*]`,
        reason: "Workspaces' own provider keys are created at run time under the stage's BYOK prefix, so their names are unknown at deploy; the grant is create, update, restore and delete under that prefix only.",
      },
      {
        id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:${addedProviderSecretPrefix(stage.name)}*]`,
        reason: "The keys of providers added at run time (sluice provider add) are created under the stage's added-providers prefix, so their names are unknown at deploy; the grant is create, update, restore and delete under that prefix only.",
      },
    );
  }
}

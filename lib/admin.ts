import { Duration, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/config';
import type { ProviderSecrets } from './secrets';
import { addedProviderSecretPrefix } from '../lambdas/catalog/added';
import { logMetricNamespace } from './alarms';
import { secretPrefixFinding } from './nag';
import { SluiceFunction } from './sluice-function';
import type { StageSettings } from './stage';
import type { TableSet } from './tables';

/** Metric counted from the management function's `admin_fault` and `audit_failed` log lines. */
export const ADMIN_FAULTS_METRIC = 'AdminFaults';

/** Properties of {@link AdminApi}. */
export interface AdminApiProps {
  /** The stage's settings (name, table prefix, log retention). */
  readonly stage: StageSettings;
  /** The stage's tables. */
  readonly tables: TableSet;
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
 * (reports; an open request's row there is a hold, which reads do not change); no table management; create, update, restore and delete of
 * secrets under the stage's BYOK and added-providers prefixes only, and no provider secret of the files.
 */
export class AdminApi extends Construct {
  /** The management function. */
  public readonly fn: lambda.Function;
  /** Its Function URL (IAM auth). */
  public readonly url: lambda.FunctionUrl;
  /** Any crash of the function in 5 minutes (a refusal is an answer, not an error). */
  public readonly errorAlarm: cloudwatch.Alarm;

  public constructor(scope: Construct, id: string, props: AdminApiProps) {
    super(scope, id);
    const { stage, tables } = props;
    const fn = new SluiceFunction(this, 'Admin', {
      stage,
      entry: props.entry ?? 'lambdas/admin/handler.ts',
      description: `Sluice ${stage.name}: management API (IAM auth, audited)`,
      memoryMb: stage.workerMemoryMb,
      timeout: Duration.seconds(60),
      environment: { [ENV.secretSource]: 'secrets-manager' },
    });
    this.fn = fn.fn;

    this.url = this.fn.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.AWS_IAM });
    // The function answers its own faults with a 500 and a log line (`admin_fault`, `audit_failed`)
    // rather than throwing, so Lambda's error count sees only crashes (timeouts, out of memory,
    // init): the alarm adds the lines. Operators call it rarely, so one fault is worth a page.
    new logs.MetricFilter(this, 'Faults', {
      logGroup: fn.logGroup,
      filterPattern: logs.FilterPattern.anyTerm('admin_fault', 'audit_failed'),
      metricNamespace: logMetricNamespace(stage.name),
      metricName: ADMIN_FAULTS_METRIC,
      metricValue: '1',
    });
    const fiveMinutes = Duration.minutes(5);
    this.errorAlarm = new cloudwatch.Alarm(this, 'Errors', {
      alarmName: `Sluice-${stage.name}-AdminErrors`,
      alarmDescription: "The management function is failing (faults and crashes, not refusals): operators' sluice commands are not carried out. Check its log group.",
      metric: new cloudwatch.MathExpression({
        expression: 'FILL(crashes, 0) + FILL(faults, 0)',
        usingMetrics: {
          crashes: this.fn.metricErrors({ period: fiveMinutes, statistic: 'Sum' }),
          faults: new cloudwatch.Metric({ namespace: logMetricNamespace(stage.name), metricName: ADMIN_FAULTS_METRIC, statistic: 'Sum', period: fiveMinutes }),
        },
        period: fiveMinutes,
        label: 'management faults and crashes',
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      // No data means nobody ran a command, which is not a fault.
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });

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
    Validations.of(this).acknowledge(
      {
        id: `AwsSolutions-IAM5[${tables.indexWildcardFinding('audit')}]`,
        reason: "Lists the audit trail by day through the audit table's own index; the wildcard covers index names of that one table only.",
      },
      {
        id: `AwsSolutions-IAM5[${secretPrefixFinding(this, stage.byokSecretPrefix)}]`,
        reason: "Workspaces' own provider keys are created at run time under the stage's BYOK prefix, so their names are unknown at deploy; the grant is create, update, restore and delete under that prefix only.",
      },
      {
        id: `AwsSolutions-IAM5[${secretPrefixFinding(this, addedProviderSecretPrefix(stage.name))}]`,
        reason: "The keys of providers added at run time (sluice provider add) are created under the stage's added-providers prefix, so their names are unknown at deploy; the grant is create, update, restore and delete under that prefix only.",
      },
    );
  }
}

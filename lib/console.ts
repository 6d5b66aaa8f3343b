import { Duration, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { CONSOLE_ENV, ORIGIN_FROM_FUNCTION_URL } from '../lambdas/console/env';
import { ENV } from '../lambdas/shared/config';
import type { ProviderSecrets } from './secrets';
import { secretPrefixFinding } from './nag';
import { SluiceFunction } from './sluice-function';
import type { StageSettings } from './stage';
import type { TableSet } from './tables';

/** Properties of {@link Console}. */
export interface ConsoleProps {
  /** The stage's settings: the console's memory, session length, alarm threshold and origin. */
  readonly stage: StageSettings;
  /** The stage's tables. */
  readonly tables: TableSet;
  /** Where the BYOK secrets live; the console sets and removes them under its prefix. */
  readonly secrets: ProviderSecrets;
  /**
   * Handler file, relative to the repository root.
   * @default 'lambdas/console/handler.ts'
   */
  readonly entry?: string;
}

/**
 * The workspace console: server-rendered pages and their private session API, served by one
 * function behind its own Function URL.
 *
 * The URL has auth `NONE`: a person's browser cannot sign AWS requests, and the console
 * authenticates people itself (passkeys, then an HttpOnly session cookie and a CSRF token on every
 * change). Its invoke mode is `BUFFERED`: pages and JSON answers are small and never streamed.
 *
 * Its origin (the passkeys' relying party) is the stage's `console.origin` when a domain of your
 * own fronts the URL; otherwise the function reads its Function URL's host from each request
 * (the function's environment cannot name its own URL: CloudFormation would see a cycle).
 *
 * Grants, least privilege: read/write on workspaces (members, invitations, passkeys, sessions,
 * settings, routing profiles) and keys (create, revoke, rotate); read on ledger (balances and key
 * windows: the console adds no credit), usage and rollups (the usage pages) and catalog (models
 * and providers a profile or bring-your-own key names); `PutItem` on the audit table only (every
 * change leaves one record, and the console never rewrites or reads the trail); no write to usage
 * (an open request's row there is a hold); no table management; create, update, restore and delete of secrets under the stage's BYOK prefix
 * and no read of any secret (a key once set is never shown).
 */
export class Console extends Construct {
  /** The console function. */
  public readonly fn: lambda.Function;
  /** Its Function URL, the console's address when no domain of your own fronts it. */
  public readonly url: lambda.FunctionUrl;
  /** Its error alarm; the stack gives every alarm the stage's topic as its action. */
  public readonly errorAlarm: cloudwatch.Alarm;

  public constructor(scope: Construct, id: string, props: ConsoleProps) {
    super(scope, id);
    const { stage, tables } = props;
    const settings = stage.console;
    this.fn = new SluiceFunction(this, 'Console', {
      stage,
      entry: props.entry ?? 'lambdas/console/handler.ts',
      description: `Sluice ${stage.name}: workspace console (passkeys, pages, session API)`,
      memoryMb: settings.memoryMb,
      // Every route is a few DynamoDB calls and a page; 30 s is room for a slow cold start and retries.
      timeout: Duration.seconds(30),
      // The pages' script and styles (esbuild, the same build local mode serves from memory) go
      // beside the handler, which reads them from `console-assets/`.
      afterBundling: (inputDir: string, outputDir: string) => [
        `"${inputDir}/node_modules/.bin/tsx" "${inputDir}/lib/console-assets.ts" "${outputDir}/console-assets" >/dev/null`,
      ],
      environment: {
        [ENV.secretSource]: 'secrets-manager',
        // The keys page states the per-key rate (SPEC: the settings screen lists it).
        [ENV.keyRatePerMinute]: String(stage.keyRatePerMinute),
        [CONSOLE_ENV.sessionMinutes]: String(settings.sessionMinutes),
        ...(settings.origin !== undefined
          ? { [CONSOLE_ENV.origin]: settings.origin }
          : { [CONSOLE_ENV.originFrom]: ORIGIN_FROM_FUNCTION_URL }),
      },
    }).fn;

    this.url = this.fn.addFunctionUrl({
      authType: lambda.FunctionUrlAuthType.NONE,
      invokeMode: lambda.InvokeMode.BUFFERED,
    });

    for (const name of ['workspaces', 'keys'] as const) tables.table(name).grantReadWriteData(this.fn);
    for (const name of ['ledger', 'usage', 'rollups', 'catalog'] as const) tables.table(name).grantReadData(this.fn);
    // The table itself only: `grant` would add its indexes, where nothing can be put.
    this.fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['dynamodb:PutItem'], resources: [tables.table('audit').tableArn] }));
    this.fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['secretsmanager:CreateSecret', 'secretsmanager:PutSecretValue', 'secretsmanager:RestoreSecret', 'secretsmanager:DeleteSecret'],
        resources: [props.secrets.byokArnPattern],
      }),
    );

    // Refusals (a wrong passkey, a member's forbidden change) are answers, not errors; an error
    // is a crash, and with no retries behind a browser every one is a page that failed someone.
    this.errorAlarm = new cloudwatch.Alarm(this, 'Errors', {
      alarmName: `Sluice-${stage.name}-ConsoleErrors`,
      alarmDescription: 'The console function is failing (crashes, not refusals): people cannot sign in or manage their workspace. Check its log group.',
      metric: this.fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
      threshold: settings.errorsPer5Min,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      // No data means nobody used the console, which is not a fault.
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });

    // cdk-nag (lib/nag.ts): the BYOK wildcard is a decision, acknowledged on this construct only.
    Validations.of(this).acknowledge({
      id: `AwsSolutions-IAM5[${secretPrefixFinding(this, stage.byokSecretPrefix)}]`,
      reason:
        "Workspaces' own provider keys are set at run time under the stage's BYOK prefix, so their names are unknown at deploy; the grant is create, update, restore and delete under that prefix only, with no read.",
    });
  }
}

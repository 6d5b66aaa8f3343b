import * as path from 'node:path';
import { Stack, type Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/config';
import { REGION_ENV } from '../lambdas/shared/region-env';
import { REPO_ROOT } from './provider-file';
import { isMultiRegion, type StageSettings } from './stage';

/** Properties of {@link SluiceFunction}. */
export interface SluiceFunctionProps {
  /** The stage's settings (name, table prefix, log retention, removal policy). */
  readonly stage: StageSettings;
  /** Handler file, relative to the repository root, e.g. `lambdas/gateway/handler.ts`; it exports `handler`. */
  readonly entry: string;
  /** The function's description, shown in the console. */
  readonly description: string;
  /** Memory, MB. */
  readonly memoryMb: number;
  /** Lambda timeout. */
  readonly timeout: Duration;
  /**
   * Variables beyond the ones every function gets (stage, table prefix, source maps).
   * @default none
   */
  readonly environment?: Readonly<Record<string, string>>;
  /**
   * Format of the function's own log lines (Lambda Managed Instances take JSON only).
   * @default Lambda's default, plain text
   */
  readonly loggingFormat?: lambda.LoggingFormat;
  /**
   * Shell commands run after esbuild, to put files beside the bundle (e.g. the console's browser
   * assets); given the repository root and the asset's output folder.
   * @default none
   */
  readonly afterBundling?: (inputDir: string, outputDir: string) => string[];
  /**
   * Modules left out of the bundle because the runtime provides them.
   * @default ['@aws-sdk/*', 'gpt-tokenizer']: the SDK the nodejs22.x runtime ships, and the tokenizer shipped beside the bundle
   */
  readonly externalModules?: readonly string[];
}

/**
 * A Sluice Lambda function as every one of them is built: Node.js 22 pinned (never
 * `NODEJS_LATEST`, so a runtime upgrade is a reviewed change), arm64, bundled by the locally
 * installed esbuild (synth needs neither Docker nor the network), its own log group with the
 * stage's retention, and its own role that may write to that log group and nothing else until
 * its construct grants more.
 */
export class SluiceFunction extends Construct {
  /** The function. */
  public readonly fn: nodejs.NodejsFunction;
  /** Its log group. */
  public readonly logGroup: logs.LogGroup;

  public constructor(scope: Construct, id: string, props: SluiceFunctionProps) {
    super(scope, id);
    const { stage } = props;
    // An explicit log group rather than the `logRetention` prop, which deploys a custom resource
    // Lambda just to set retention.
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: stage.logRetention,
      removalPolicy: stage.removalPolicy,
    });
    // Its own role, allowed to write to its own log group only: the managed basic execution role
    // would let it create and write any log group of the account (cdk-nag AwsSolutions-IAM4).
    const role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: props.description,
    });
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [this.logGroup.logGroupArn],
      }),
    );
    // A function of a multi-region stage knows its region, the home and the others (docs/regions.md);
    // a one-region stage's functions get nothing new, so its template is unchanged.
    const regionEnv: Record<string, string> = isMultiRegion(stage)
      ? {
          [REGION_ENV.region]: Stack.of(this).region,
          [REGION_ENV.homeRegion]: stage.regions[0] ?? '',
          [REGION_ENV.regions]: stage.regions.join(','),
        }
      : {};
    this.fn = new nodejs.NodejsFunction(this, 'Function', {
      role,
      entry: path.join(REPO_ROOT, props.entry),
      handler: 'handler',
      projectRoot: REPO_ROOT,
      depsLockFilePath: path.join(REPO_ROOT, 'package-lock.json'),
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memoryMb,
      timeout: props.timeout,
      description: props.description,
      logGroup: this.logGroup,
      ...(props.loggingFormat === undefined ? {} : { loggingFormat: props.loggingFormat }),
      environment: {
        [ENV.stage]: stage.name,
        [ENV.tablePrefix]: stage.tablePrefix,
        // Stack traces in logs point at the TypeScript sources, not the minified bundle.
        NODE_OPTIONS: '--enable-source-maps',
        ...regionEnv,
        ...props.environment,
      },
      bundling: {
        minify: true,
        sourceMap: true,
        // Line mapping is all the stack traces need; embedding the sources would double the bundle.
        sourcesContent: false,
        target: 'node22',
        format: nodejs.OutputFormat.CJS,
        // The nodejs22.x runtime ships SDK v3; bundling it would only slow cold starts. The
        // tokenizer (estimated charges, a rare path) is left out of the bundle too: its encoding
        // tables are megabytes that every cold start would parse; it ships beside the bundle and
        // loads only when a count is needed (see lambdas/core/token-count.ts).
        externalModules: [...(props.externalModules ?? ['@aws-sdk/*', 'gpt-tokenizer'])],
        commandHooks: {
          beforeBundling: () => [],
          beforeInstall: () => [],
          afterBundling: (inputDir: string, outputDir: string) => [
            `mkdir -p "${outputDir}/node_modules/gpt-tokenizer"`,
            `cp "${inputDir}/node_modules/gpt-tokenizer/package.json" "${outputDir}/node_modules/gpt-tokenizer/"`,
            `cp -R "${inputDir}/node_modules/gpt-tokenizer/cjs" "${outputDir}/node_modules/gpt-tokenizer/cjs"`,
            `find "${outputDir}/node_modules/gpt-tokenizer" -name '*.map' -delete`,
            ...(props.afterBundling?.(inputDir, outputDir) ?? []),
          ],
        },
        // ES modules first, so what is bundled (@smithy/signature-v4, @middy/core) is tree-shaken:
        // the CommonJS build of the signer would pull in 130 KB of @smithy/core.
        mainFields: ['module', 'main'],
        forceDockerBundling: false,
        // esbuild's per-file size report is noise in every synth and test run; warnings still show.
        logLevel: nodejs.LogLevel.WARNING,
      },
    });
  }
}

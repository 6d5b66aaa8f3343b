import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/config';
import type { ManagedInstances } from './managed-instances';
import type { ProviderSecrets } from './secrets';
import { SluiceFunction } from './sluice-function';
import { GATEWAY_TIMEOUT, REQUEST_LIMIT, type StageSettings } from './stage';
import type { TableSet } from './tables';

/** Properties of {@link Gateway}. */
export interface GatewayProps {
  /** The stage's settings (memory, key rate, hold grace, log retention). */
  readonly stage: StageSettings;
  /** The stage's tables; the gateway is granted all but rollups. */
  readonly tables: TableSet;
  /** Provider secrets and the BYOK prefix the gateway reads keys from. */
  readonly secrets: ProviderSecrets;
  /**
   * Lambda Managed Instances to run on (a stage whose `compute` is `managed-instances`): the
   * function gets the environments' memory, JSON logs (the only format managed instances take)
   * and its worker-thread count, and is attached to the capacity provider.
   * @default on-demand Lambda, with the stage's `gatewayMemoryMb`
   */
  readonly managedInstances?: ManagedInstances;
  /**
   * Handler file, relative to the repository root.
   * @default 'lambdas/gateway/handler.ts'
   */
  readonly entry?: string;
}

/**
 * The gateway: the function that serves SPEC's API, behind a Lambda Function URL.
 *
 * The URL has auth `NONE` because Sluice authenticates its own bearer keys, and invoke mode
 * `RESPONSE_STREAM` so SSE bytes reach the client as the provider sends them. The function's
 * timeout ({@link GATEWAY_TIMEOUT}) sits above SPEC's 540 s request limit so the function, not
 * Lambda, ends an overlong request and still settles it.
 *
 * Grants, least privilege: read on keys, workspaces and catalog; read/write on ledger and usage
 * (admission and settlement are `TransactWriteItems`, authorised per item action; a request's row
 * in usage is its hold until it settles);
 * nothing on rollups; no table management actions; `GetSecretValue` on the provider secrets
 * and the stage's BYOK prefix only.
 */
export class Gateway extends Construct {
  /** The gateway function. */
  public readonly fn: lambda.Function;
  /** Its Function URL, the service's public endpoint. */
  public readonly url: lambda.FunctionUrl;

  public constructor(scope: Construct, id: string, props: GatewayProps) {
    super(scope, id);
    const { stage, tables, managedInstances } = props;
    if ((managedInstances !== undefined) !== (stage.compute === 'managed-instances')) {
      throw new Error(`Gateway: stage ${stage.name} has compute ${stage.compute} but managed instances were ${managedInstances === undefined ? 'not ' : ''}given`);
    }
    // A function cannot shed its capacity provider (CloudFormation can only change it), so each
    // compute mode has a function of its own: switching replaces the function and its URL.
    this.fn = new SluiceFunction(this, managedInstances === undefined ? 'Gateway' : 'ManagedGateway', {
      stage,
      entry: props.entry ?? 'lambdas/gateway/handler.ts',
      description: `Sluice ${stage.name}: OpenAI-compatible gateway (Function URL, streaming${managedInstances === undefined ? '' : ', managed instances'})`,
      memoryMb: managedInstances === undefined ? stage.gatewayMemoryMb : stage.managedInstances.memoryMb,
      timeout: GATEWAY_TIMEOUT,
      ...(managedInstances === undefined ? {} : { loggingFormat: lambda.LoggingFormat.JSON }),
      environment: {
        ...managedInstances?.environment(),
        [ENV.keyRatePerMinute]: String(stage.keyRatePerMinute),
        [ENV.secretSource]: 'secrets-manager',
        [ENV.requestLimitMs]: String(REQUEST_LIMIT.toMilliseconds()),
        // The gateway writes each hold's expiry; the sweeper must use the same grace to read it.
        [ENV.holdGraceMs]: String(stage.holdGraceMs),
        // Usage rows it writes carry a TTL this many days out (rollups are kept).
        [ENV.usageRetentionDays]: String(stage.usageRetentionDays),
      },
    }).fn;

    // On managed instances the URL, unqualified, invokes $LATEST.PUBLISHED, which every deploy publishes.
    managedInstances?.attach(this.fn);

    this.url = this.fn.addFunctionUrl({
      authType: lambda.FunctionUrlAuthType.NONE,
      invokeMode: lambda.InvokeMode.RESPONSE_STREAM,
    });

    for (const name of ['keys', 'workspaces', 'catalog'] as const) tables.table(name).grantReadData(this.fn);
    for (const name of ['ledger', 'usage'] as const) tables.table(name).grantReadWriteData(this.fn);
    props.secrets.grantRead(this.fn);
  }
}

import { ArnFormat, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import type { ProviderKeySource } from './provider-file';
import { addedProviderSecretPrefix } from '../lambdas/catalog/added';

/** Properties of {@link ProviderSecrets}. */
export interface ProviderSecretsProps {
  /** Stage name, substituted for `{stage}` in each provider's `keySource.secretName`. */
  readonly stage: string;
  /** Provider accounts; those whose `keySource` is `'none'` get no secret. */
  readonly providers: readonly ProviderKeySource[];
  /** Name prefix of the BYOK secrets that operators create at runtime, e.g. `sluice/dev/byok/`. */
  readonly byokPrefix: string;
  /**
   * What happens to the secrets when they leave the stack.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * Regions that get a replica of every provider secret (a multi-region stage's home stack lists
   * the others): Secrets Manager copies the value there, and each region's functions read their own
   * region's copy, which keeps working when the home region does not (docs/regions.md).
   * @default none
   */
  readonly replicaRegions?: readonly string[];
  /**
   * The secrets are another region's replicas: found by name (a replica keeps its secret's name),
   * not created. A multi-region stage's stacks other than the home's.
   * @default false
   */
  readonly replicas?: boolean;
}

// Secrets Manager's own rule for names; checked here so a typo fails at synth, not at deploy.
const SECRET_NAME = /^[A-Za-z0-9/_+=.@-]{1,512}$/;

/** A provider's secret name for a stage: every `{stage}` replaced. */
export function providerSecretName(template: string, stage: string): string {
  return template.split('{stage}').join(stage);
}

/**
 * The service's own provider keys, one Secrets Manager secret per provider account that takes a
 * key, plus read access to the workspaces' BYOK secrets.
 *
 * The secrets are created empty: the template never carries a key. An operator stores each
 * value (`aws secretsmanager put-secret-value`); until then reading it fails, which the gateway
 * reports as the provider being unavailable. BYOK secrets are not in the stack at all: the CLI
 * creates them under {@link ProviderSecretsProps.byokPrefix}, and readers are granted that
 * prefix only.
 */
export class ProviderSecrets extends Construct {
  /** The provider secrets, one per distinct secret name. */
  public readonly secrets: readonly secretsmanager.ISecret[];
  /** ARN pattern matching every BYOK secret of the stage (names get a random suffix). */
  public readonly byokArnPattern: string;
  /**
   * ARN pattern matching the keys of providers added at run time (`sluice provider add`), under
   * `sluice/<stage>/added-providers/`: the management API writes them, the gateway reads them.
   */
  public readonly addedProvidersArnPattern: string;

  public constructor(scope: Construct, id: string, props: ProviderSecretsProps) {
    super(scope, id);
    const byName = new Map<string, secretsmanager.ISecret>();
    for (const provider of props.providers) {
      if (provider.keySource === 'none') continue;
      const secretName = providerSecretName(provider.keySource.secretName, props.stage);
      if (!SECRET_NAME.test(secretName)) {
        throw new Error(`provider ${provider.name}: invalid secret name ${JSON.stringify(secretName)}`);
      }
      // A provider secret inside the BYOK prefix would be writable by whoever manages BYOK keys.
      if (secretName.startsWith(props.byokPrefix)) {
        throw new Error(`provider ${provider.name}: secret ${secretName} lies under the BYOK prefix ${props.byokPrefix}`);
      }
      // Two provider accounts may share one key; one secret serves both.
      if (byName.has(secretName)) continue;
      const secretId = secretName.replace(/[^A-Za-z0-9]+/g, '-');
      if (props.replicas === true) {
        byName.set(secretName, secretsmanager.Secret.fromSecretNameV2(this, secretId, secretName));
        continue;
      }
      const replicaRegions = props.replicaRegions ?? [];
      const secret = new secretsmanager.Secret(this, secretId, {
        secretName,
        description: `Sluice ${props.stage}: the service's API key for provider ${provider.name} (value set by an operator)`,
        removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
        ...(replicaRegions.length === 0 ? {} : { replicaRegions: replicaRegions.map((region) => ({ region })) }),
      });
      // The L2 construct always asks CloudFormation to generate a random value; without
      // GenerateSecretString and SecretString the secret is created empty, so a forgotten key
      // fails loudly instead of sending a random string to the provider.
      const cfn = secret.node.defaultChild as secretsmanager.CfnSecret;
      cfn.addPropertyDeletionOverride('GenerateSecretString');
      byName.set(secretName, secret);
    }
    this.secrets = [...byName.values()];
    this.byokArnPattern = Stack.of(this).formatArn({
      service: 'secretsmanager',
      resource: 'secret',
      resourceName: `${props.byokPrefix}*`,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    this.addedProvidersArnPattern = Stack.of(this).formatArn({
      service: 'secretsmanager',
      resource: 'secret',
      resourceName: `${addedProviderSecretPrefix(props.stage)}*`,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
  }

  /** The prefixes of the secrets created at run time (BYOK keys, run-time providers' keys), as ARN patterns. */
  public get runtimeArnPatterns(): string[] {
    return [this.byokArnPattern, this.addedProvidersArnPattern];
  }

  /**
   * Lets `grantee` read every provider secret, every BYOK secret and every run-time provider's
   * key of the stage, nothing else.
   */
  public grantRead(grantee: iam.IGrantable): void {
    for (const secret of this.secrets) secret.grantRead(grantee);
    iam.Grant.addToPrincipal({
      grantee,
      actions: ['secretsmanager:GetSecretValue'],
      resourceArns: this.runtimeArnPatterns,
    });
  }
}

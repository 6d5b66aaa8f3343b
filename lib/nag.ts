/**
 * cdk-nag on Sluice: the AwsSolutions and Serverless packs run on every synth (`bin/app.ts`) and
 * in the CDK tests, which require zero unacknowledged findings. Every acknowledgement is here,
 * with its reason, on the narrowest construct that carries the finding, so a new resource that
 * breaks a rule is reported rather than silently covered.
 */
import { Stack, Token, Validations, type App } from 'aws-cdk-lib';
import { AwsSolutionsChecks, ServerlessChecks, type NagPack } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import type { StageSettings } from './stage';
import type { TableSet } from './tables';
import { addedProviderSecretPrefix } from '../lambdas/catalog/added';

/** The packs Sluice is held to. */
export function nagPacks(): NagPack[] {
  return [new AwsSolutionsChecks(), new ServerlessChecks()];
}

/** Runs both packs as validation plugins of the app: a finding fails `cdk synth`. */
export function applyNag(app: App): void {
  Validations.of(app).addPlugins(...nagPacks());
}

/**
 * How cdk-nag names a grant on every secret under `prefix` in a finding id: the region is the
 * stack's own when it has one (a multi-region stage's stacks), `<AWS::Region>` otherwise.
 */
export function secretPrefixFinding(scope: IConstruct, prefix: string): string {
  const stack = Stack.of(scope);
  const region = Token.isUnresolved(stack.region) ? '<AWS::Region>' : stack.region;
  return `Resource::arn:<AWS::Partition>:secretsmanager:${region}:<AWS::AccountId>:secret:${prefix}*`;
}

function ack(scope: IConstruct | undefined, id: string, reason: string): void {
  if (scope === undefined) throw new Error(`cdk-nag acknowledgement ${id}: construct not found`);
  Validations.of(scope).acknowledge({ id, reason });
}

function child(scope: IConstruct, path: string): IConstruct | undefined {
  let node: IConstruct | undefined = scope;
  for (const id of path.split('/')) node = node?.node.tryFindChild(id);
  return node;
}

/** Stack-wide decisions: each applies to every function of the stage, by design. */
const STACK_WIDE: ReadonlyArray<readonly [string, string]> = [
  [
    'AwsSolutions-L1',
    'Runtimes are pinned to nodejs22.x on purpose (a runtime upgrade is a reviewed change, never NODEJS_LATEST); the CDK tests assert the pin.',
  ],
  ['Serverless-LambdaLatestVersion', 'Same pin as AwsSolutions-L1: nodejs22.x, upgraded by a reviewed change.'],
  [
    'Serverless-LambdaDLQ',
    'No function is invoked asynchronously with work to lose: the gateway answers its URL synchronously, the aggregator\'s stream mapping sends failures to its own SQS queue, the catalog import answers CloudFormation itself, and the sweeper and notifier are schedule ticks whose next run redoes the work.',
  ],
  [
    'Serverless-LambdaTracing',
    'Requests are traced by request id on one EMF log line each; X-Ray would add a per-request cost and a wildcard IAM grant for no signal the metrics and logs lack.',
  ],
];

/**
 * Acknowledges, with reasons, the findings that are decisions rather than holes, each on the
 * construct it concerns. Called by the stack once every construct exists.
 */
export function acknowledgeStackFindings(stack: Stack, stage: Pick<StageSettings, 'byokSecretPrefix' | 'name'>, tables: TableSet): void {
  for (const [id, reason] of STACK_WIDE) ack(stack, id, reason);

  ack(
    child(stack, 'ProviderSecrets'),
    'AwsSolutions-SMG4',
    'These secrets hold the API keys providers issue; a key is rotated at the provider, by an operator, and there is no rotation API a rotation Lambda could call.',
  );

  const byok = child(stack, 'Gateway');
  ack(
    byok,
    `AwsSolutions-IAM5[${secretPrefixFinding(stack, stage.byokSecretPrefix)}]`,
    'Workspaces\' own provider keys are created at run time under the stage\'s BYOK prefix, so their names are unknown at deploy; the grant is GetSecretValue under that prefix only.',
  );
  ack(
    byok,
    `AwsSolutions-IAM5[${secretPrefixFinding(stack, addedProviderSecretPrefix(stage.name))}]`,
    'The keys of providers added at run time (sluice provider add) are created under the stage\'s added-providers prefix, so their names are unknown at deploy; the grant is GetSecretValue under that prefix only.',
  );

  // CDK's table grants include the table's own indexes (`<table arn>/index/*`): scoped to one table.
  for (const table of ['keys', 'workspaces', 'ledger', 'usage', 'rollups', 'catalog'] as const) {
    ack(
      stack,
      `AwsSolutions-IAM5[${tables.indexWildcardFinding(table)}]`,
      `Reads through the ${table} table's own secondary indexes; the wildcard covers index names of that one table only.`,
    );
  }

  // Managed instances (a stage with compute managed-instances): the capacity provider's operator role.
  const operatorRole = child(stack, 'ManagedInstances/CapacityProvider/OperatorRole');
  if (operatorRole !== undefined) {
    ack(
      operatorRole,
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AWSLambdaManagedEC2ResourceOperator]',
      'The role Lambda assumes to launch and run the managed instances; AWSLambdaManagedEC2ResourceOperator is the policy AWS documents for it and extends as the service grows (CloudWatch Logs and VPC encryption-control permissions were added after launch), where a copy kept here would fall behind and break the capacity provider. Only Lambda can assume the role.',
    );
  }

  const aggregator = child(stack, 'Aggregator');
  ack(aggregator, 'AwsSolutions-IAM5[Resource::*]', 'dynamodb:ListStreams, added by the stream event source, cannot be scoped to a resource.');
  const dlq = child(stack, 'Aggregator/DeadLetters');
  ack(dlq, 'AwsSolutions-SQS3', 'This queue is the dead-letter destination of the usage stream mapping; a dead-letter queue needs no dead-letter queue of its own.');
  ack(dlq, 'Serverless-SQSRedrivePolicy', 'Same queue: it is itself the dead-letter destination, nothing redrives from it automatically.');

  // The notifier runs in the home region only; the warden in each region of a multi-region stage.
  for (const scheduled of ['Sweeper', 'LowCredit', 'Warden']) {
    const scope = child(stack, scheduled);
    if (scope === undefined && scheduled !== 'Sweeper') continue;
    ack(
      scope,
      'Serverless-LambdaAsyncFailureDestination',
      'A failed tick is not retried or kept: the next tick, a minute or five later, does the same work, and the function\'s error alarm reaches the alarm topic.',
    );
    ack(scope, 'Serverless-EventBusDLQ', 'A schedule tick that cannot be delivered needs no replay: the next tick does the same work.');
  }
}

/** The transfer agent's findings, acknowledged on the agent (a multi-region stage's stacks). */
export function acknowledgeTransferAgent(agent: IConstruct): void {
  ack(agent, 'AwsSolutions-IAM5[Resource::*]', 'dynamodb:ListStreams, added by the stream event source, cannot be scoped to a resource.');
  const dlq = child(agent, 'DeadLetters');
  ack(dlq, 'AwsSolutions-SQS3', "This queue is the dead-letter destination of the ledger stream mapping; a dead-letter queue needs no dead-letter queue of its own.");
  ack(dlq, 'Serverless-SQSRedrivePolicy', 'Same queue: it is itself the dead-letter destination, nothing redrives from it automatically.');
}

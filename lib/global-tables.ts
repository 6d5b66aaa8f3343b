import { RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as cr from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';
import { ALL_TABLES, tableName, type TableName } from '../lambdas/shared/schema';
import { attribute, logicalId, nagIndexWildcard, type TableSet } from './tables';

/** Properties of {@link SluiceGlobalTables}. */
export interface SluiceGlobalTablesProps {
  /** Prefix of every table name, e.g. `sluice-prod-`; the functions of every region get the same. */
  readonly tablePrefix: string;
  /** The stage's other regions, each given a replica of every table. */
  readonly replicaRegions: readonly string[];
  /**
   * What happens to the tables when they leave the stack.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * DynamoDB deletion protection on every table and every replica.
   * @default false
   */
  readonly deletionProtection?: boolean;
}

/**
 * Every table of a multi-region stage as a DynamoDB global table (`TableV2`,
 * `AWS::DynamoDB::GlobalTable`, multi-Region eventual consistency), defined once, in the home
 * region's stack, with a replica in each other region: AWS requires every replica of a global
 * table in one stack (docs/regions.md [S11]).
 *
 * As {@link SluiceTables} in every other way (keys, indexes and TTL from the schema, on demand,
 * point-in-time recovery and deletion protection on every replica, AWS-managed encryption, fixed
 * names), except streams: every table has one (`NEW_IMAGE`), because MREC replicates through each
 * replica's stream anyway, and the transfer agent reads the ledger's while the aggregator reads
 * usage's, each in its own region.
 */
export class SluiceGlobalTables extends Construct implements TableSet {
  /** Every table, in the schema's order. */
  public readonly all: readonly dynamodb.TableV2[];
  private readonly byName = new Map<TableName, dynamodb.TableV2>();

  public constructor(scope: Construct, id: string, props: SluiceGlobalTablesProps) {
    super(scope, id);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    for (const schema of ALL_TABLES) {
      const table = new dynamodb.TableV2(this, logicalId(schema.name), {
        tableName: tableName(props.tablePrefix, schema.name),
        partitionKey: attribute(schema.partitionKey),
        sortKey: schema.sortKey ? attribute(schema.sortKey) : undefined,
        billing: dynamodb.Billing.onDemand(),
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        encryption: dynamodb.TableEncryptionV2.awsManagedKey(),
        timeToLiveAttribute: schema.ttlAttribute,
        // NEW_IMAGE on every table: consumers need the written item, never what it replaced.
        dynamoStream: dynamodb.StreamViewType.NEW_IMAGE,
        removalPolicy: schema.retain === true ? RemovalPolicy.RETAIN : removalPolicy,
        deletionProtection: props.deletionProtection ?? false,
        globalSecondaryIndexes: schema.indexes.map((index) => ({
          indexName: index.indexName,
          partitionKey: attribute(index.partitionKey),
          sortKey: index.sortKey ? attribute(index.sortKey) : undefined,
          projectionType: index.projection === 'KEYS_ONLY' ? dynamodb.ProjectionType.KEYS_ONLY : dynamodb.ProjectionType.ALL,
        })),
        replicas: props.replicaRegions.map((region) => ({ region })),
      });
      this.byName.set(schema.name, table);
    }
    this.all = [...this.byName.values()];
  }

  public table(name: TableName): dynamodb.TableV2 {
    const table = this.byName.get(name);
    if (!table) throw new Error(`SluiceGlobalTables has no table ${JSON.stringify(name)}`);
    return table;
  }

  public indexWildcardFinding(name: TableName): string {
    return nagIndexWildcard(this, this.table(name).node.defaultChild as dynamodb.CfnGlobalTable);
  }
}

/** Properties of {@link SluiceReplicaTables}. */
export interface SluiceReplicaTablesProps {
  /** Prefix of every table name, the same in every region. */
  readonly tablePrefix: string;
  /** Tables whose stream a function of this region reads (the usage table, the ledger). */
  readonly streams: readonly TableName[];
}

/**
 * The replicas, in a region other than the home, of a multi-region stage's global tables: found by
 * their fixed names (a replica keeps its table's name), with no cross-region reference.
 *
 * A replica's stream ARN ends in a creation time CloudFormation cannot give: the global table's
 * `StreamArn` is its home replica's, and CDK's `replica(region)` offers only `<arn>/stream/*`,
 * which an event source mapping cannot take (aws/aws-cdk#31335, cloudformation-coverage-roadmap
 * #1988). So each stream this region reads is looked up at deploy (`DescribeTable`'s
 * `LatestStreamArn`, in this region), after the home stack has made the replica: the region's
 * stack depends on the home's.
 */
export class SluiceReplicaTables extends Construct implements TableSet {
  /** Every table, in the schema's order. */
  public readonly all: readonly dynamodb.ITableV2[];
  private readonly byName = new Map<TableName, dynamodb.ITableV2>();
  private readonly arns = new Map<TableName, string>();

  public constructor(scope: Construct, id: string, props: SluiceReplicaTablesProps) {
    super(scope, id);
    const stack = Stack.of(this);
    for (const schema of ALL_TABLES) {
      const name = tableName(props.tablePrefix, schema.name);
      const tableArn = stack.formatArn({ service: 'dynamodb', resource: 'table', resourceName: name });
      let tableStreamArn: string | undefined;
      if (props.streams.includes(schema.name)) {
        const lookup = new cr.AwsCustomResource(this, `${logicalId(schema.name)}Stream`, {
          resourceType: 'Custom::SluiceReplicaStream',
          onUpdate: {
            service: 'DynamoDB',
            action: 'describeTable',
            parameters: { TableName: name },
            // One stream per replica for its life: the id never changes, so the lookup runs on create
            // and whenever the table's name does.
            physicalResourceId: cr.PhysicalResourceId.of(`${name}@${stack.region}`),
            outputPaths: ['Table.LatestStreamArn'],
          },
          policy: cr.AwsCustomResourcePolicy.fromSdkCalls({ resources: [tableArn] }),
          // The SDK the Lambda runtime ships; installing the latest would reach npm at every deploy.
          installLatestAwsSdk: false,
        });
        tableStreamArn = lookup.getResponseField('Table.LatestStreamArn');
      }
      const table = dynamodb.TableV2.fromTableAttributes(this, logicalId(schema.name), {
        tableArn,
        tableStreamArn,
        grantIndexPermissions: schema.indexes.length > 0,
      });
      this.byName.set(schema.name, table);
      this.arns.set(schema.name, tableArn);
    }
    this.all = [...this.byName.values()];
  }

  public table(name: TableName): dynamodb.ITableV2 {
    const table = this.byName.get(name);
    if (!table) throw new Error(`SluiceReplicaTables has no table ${JSON.stringify(name)}`);
    return table;
  }

  public indexWildcardFinding(name: TableName): string {
    const arn = this.arns.get(name);
    if (arn === undefined) throw new Error(`SluiceReplicaTables has no table ${JSON.stringify(name)}`);
    // cdk-nag renders the partition and account pseudo parameters as <AWS::Partition>, <AWS::AccountId>.
    const rendered = Stack.of(this).resolve(arn) as unknown;
    return `Resource::${renderJoin(rendered)}/index/*`;
  }

  /**
   * Acknowledges the stream lookups' cdk-nag findings, on the lookups only (called by the stack
   * once every construct exists).
   */
  public acknowledgeLookups(): void {
    // AwsCustomResource's provider is one function per stack, beside this construct.
    const provider = Stack.of(this).node.tryFindChild(AWS_CUSTOM_RESOURCE_PROVIDER_ID);
    if (provider === undefined) throw new Error('SluiceReplicaTables: the stream lookups\' provider was not found');
    Validations.of(provider).acknowledge(
      {
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
        reason: "CDK's AwsCustomResource provider (the replica stream lookup, run at deploy) writes its own logs with AWS's basic execution policy; its other grant is DescribeTable on this stage's streamed tables.",
      },
      {
        id: 'Serverless-LambdaDefaultMemorySize',
        reason: "CDK's AwsCustomResource provider makes one DescribeTable call per deploy; its default memory is ample.",
      },
    );
  }
}

/** The construct id CDK gives AwsCustomResource's singleton provider function in a stack. */
const AWS_CUSTOM_RESOURCE_PROVIDER_ID = 'AWS679f53fac002430cb0da5b7982bd2287';

/** `{"Fn::Join": ["", [...]]}` of strings and pseudo parameters, as cdk-nag prints it in a finding. */
function renderJoin(value: unknown): string {
  if (typeof value === 'string') return value;
  const join = (value as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (join === undefined) throw new Error(`cannot render ${JSON.stringify(value)} for cdk-nag`);
  return join[1]
    .map((part) => {
      if (typeof part === 'string') return part;
      const ref = (part as { Ref?: string }).Ref;
      if (ref !== undefined) return `<${ref}>`;
      throw new Error(`cannot render ${JSON.stringify(part)} for cdk-nag`);
    })
    .join(join[0]);
}

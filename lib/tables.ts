import { RemovalPolicy, Stack, type CfnResource } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { ALL_TABLES, tableName, type KeyAttribute, type TableName } from '../lambdas/shared/schema';

/** Properties of {@link SluiceTables}. */
export interface SluiceTablesProps {
  /** Prefix of every table name, e.g. `sluice-dev-`; the functions get the same prefix. */
  readonly tablePrefix: string;
  /**
   * What happens to the tables when they leave the stack.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * DynamoDB deletion protection on every table.
   * @default false
   */
  readonly deletionProtection?: boolean;
}

export function attribute(key: KeyAttribute): dynamodb.Attribute {
  return { name: key.name, type: key.type === 'S' ? dynamodb.AttributeType.STRING : dynamodb.AttributeType.NUMBER };
}

/**
 * A stage's tables as the constructs see them, wherever they were defined: this stack's own
 * tables ({@link SluiceTables}, one region), the global tables of a multi-region stage's home
 * (`SluiceGlobalTables`), or another region's replicas of them (`SluiceReplicaTables`), all in
 * `lib/global-tables.ts`.
 */
export interface TableSet {
  /** Every table, in the schema's order. */
  readonly all: readonly dynamodb.ITable[];
  /** The table of a schema name; throws if it was not built (a wiring mistake, found at synth). */
  table(name: TableName): dynamodb.ITable;
  /**
   * How cdk-nag names the resource of a grant on a table's own indexes (`<table arn>/index/*`) in a
   * finding id, so the one acknowledgement per table can name it exactly.
   */
  indexWildcardFinding(name: TableName): string;
}

/** cdk-nag's rendering of an ARN attribute of a resource of the stack: `<LogicalId.Arn>`. */
export function nagIndexWildcard(scope: Construct, resource: CfnResource): string {
  return `Resource::<${Stack.of(scope).getLogicalId(resource)}.Arn>/index/*`;
}

// Logical ids come from the schema name, so adding a table never renames (and so replaces) another.
export function logicalId(name: TableName): string {
  return `${name.charAt(0).toUpperCase()}${name.slice(1)}Table`;
}

/**
 * Every DynamoDB table of a stage, built from the shared schema module (`lambdas/shared/schema.ts`)
 * so that keys, indexes, TTL and streams cannot drift from what local mode and the functions use.
 *
 * Each table is on-demand (traffic is bursty and per-request), has point-in-time recovery (it
 * holds money), is encrypted with the AWS-managed key, and has a fixed name `<prefix><name>`
 * because the functions derive names from `SLUICE_TABLE_PREFIX`.
 */
export class SluiceTables extends Construct implements TableSet {
  /** Every table, in the schema's order. */
  public readonly all: readonly dynamodb.Table[];
  private readonly byName = new Map<TableName, dynamodb.Table>();

  public constructor(scope: Construct, id: string, props: SluiceTablesProps) {
    super(scope, id);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    for (const schema of ALL_TABLES) {
      const table = new dynamodb.Table(this, logicalId(schema.name), {
        tableName: tableName(props.tablePrefix, schema.name),
        partitionKey: attribute(schema.partitionKey),
        sortKey: schema.sortKey ? attribute(schema.sortKey) : undefined,
        billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
        pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
        encryption: dynamodb.TableEncryption.AWS_MANAGED,
        timeToLiveAttribute: schema.ttlAttribute,
        // NEW_IMAGE only: the aggregator needs the settled row, never what it replaced.
        stream: schema.stream ? dynamodb.StreamViewType.NEW_IMAGE : undefined,
        // The audit trail outlives the stack in every stage (schema `retain`).
        removalPolicy: schema.retain === true ? RemovalPolicy.RETAIN : removalPolicy,
        deletionProtection: props.deletionProtection ?? false,
      });
      for (const index of schema.indexes) {
        table.addGlobalSecondaryIndex({
          indexName: index.indexName,
          partitionKey: attribute(index.partitionKey),
          sortKey: index.sortKey ? attribute(index.sortKey) : undefined,
          projectionType: index.projection === 'KEYS_ONLY' ? dynamodb.ProjectionType.KEYS_ONLY : dynamodb.ProjectionType.ALL,
        });
      }
      this.byName.set(schema.name, table);
    }
    this.all = [...this.byName.values()];
  }

  /** The table of a schema name; throws if it was not built (a wiring mistake, found at synth). */
  public table(name: TableName): dynamodb.Table {
    const table = this.byName.get(name);
    if (!table) throw new Error(`SluiceTables has no table ${JSON.stringify(name)}`);
    return table;
  }

  public indexWildcardFinding(name: TableName): string {
    return nagIndexWildcard(this, this.table(name).node.defaultChild as dynamodb.CfnTable);
  }
}

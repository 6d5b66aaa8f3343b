/**
 * The I/O of one round's heartbeat (docs/regions.md, "Configuration"); the decisions are
 * `health.ts`'s. Apart from the handler so it can be driven against DynamoDB Local.
 */
import { GetCommand, PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { ConfigHomeView, DynamoConfigHome } from '../store/config-home';
import type { RegionSetup } from '../store/regions';
import { configHomeSeen, heartbeatAge, heartbeatPlan, parseHeartbeat } from './health';

/** What one heartbeat round runs against. */
export interface HeartbeatRoundInput {
  readonly doc: DynamoDBDocumentClient;
  /** The warden's own region. */
  readonly own: string;
  /** The stage's regions (the home region first). */
  readonly setup: RegionSetup;
  /** The configuration home's store in this region (read every round, no cache). */
  readonly configHomes: Pick<DynamoConfigHome, 'read'>;
  /** The workspaces table's name in this region. */
  readonly table: string;
  /** Epoch milliseconds. */
  readonly now: () => number;
}

/** What one heartbeat round found. */
export interface HeartbeatRoundResult {
  /** The configuration home this region's replica names; undefined when it could not be read. */
  readonly home: string | undefined;
  /** How long this replica has not heard from the configuration home (0 in the home); undefined: no evidence. */
  readonly ageMs: number | undefined;
}

/**
 * One round's heartbeat: the configuration home read in this region's replica (strongly
 * consistent there), then the home's warden writes its own heartbeat item (age 0) and every other
 * warden reads the home's item and derives how long its replica has not heard from the home
 * (`heartbeatAge`). `home` is undefined and the age too when a read failed: no evidence of lag (a
 * store failing here shows in the probes as 5xx), and no heartbeat written this round.
 */
export async function heartbeatRound(input: HeartbeatRoundInput): Promise<HeartbeatRoundResult> {
  const { doc, own, setup, table } = input;
  let view: ConfigHomeView;
  try {
    view = await input.configHomes.read();
  } catch (err) {
    console.log(JSON.stringify({ event: 'config_home_unread', warden: own, error: err instanceof Error ? err.name : 'unknown' }));
    return { home: undefined, ageMs: undefined };
  }
  const stageHome = setup.regions[0] ?? own;
  const plan = heartbeatPlan(own, stageHome, view.home);
  const now = input.now();
  try {
    if (plan.write) {
      await doc.send(new PutCommand({ TableName: table, Item: { ...plan.key, at: now, region: own } }));
      return { home: view.home, ageMs: 0 };
    }
    const got = await doc.send(new GetCommand({ TableName: table, Key: plan.key, ConsistentRead: true }));
    return { home: view.home, ageMs: heartbeatAge(now, configHomeSeen(view.home, view.record), parseHeartbeat(got.Item, stageHome)) };
  } catch (err) {
    console.log(JSON.stringify({ event: 'heartbeat_failed', warden: own, error: err instanceof Error ? err.name : 'unknown' }));
    return { home: view.home, ageMs: undefined };
  }
}

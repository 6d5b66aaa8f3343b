/**
 * Where the configuration home is recorded, and how a region's management API learns it
 * (docs/regions.md, "Configuration"; the rule is `lambdas/core/config-home.ts`).
 *
 * One item of the workspaces table, `STAGE` / `CONFIG_HOME` (beside the warden's `STAGE` /
 * `HEARTBEAT`; no listing reads it: listings filter on their own sort keys), holding the region,
 * the move's generation, when and by whom. The table is a global table, so each region reads the
 * item in its own replica. It is written only by a move, by the target region's management API,
 * conditioned on the generation it read (two moves in one region: one wins, the other is told to
 * try again). Two moves made in two regions at once both succeed, each in its region; replication
 * settles them by last writer wins, the later write whole, and until it has every region reads its
 * own (docs/regions.md says what that window is and what the operator does).
 */
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { CONFIG_HOME_CACHE_MS, cacheFresh, configurationHome, nextRecord, type Cached, type ConfigHomeRecord } from '../core/config-home';
import type { AdminContext } from './directory-context';
import { nowOf, table } from './directory-context';
import { ConcurrentUpdateError, HomeRegionRequiredError } from './directory-errors';
import { homeRegion, type RegionSetup } from './regions';

/** The item's key on the workspaces table. */
export const CONFIG_HOME_KEY = { pk: 'STAGE', sk: 'CONFIG_HOME' } as const;

/** What a region's management API knows of the configuration home. */
export interface ConfigHomeView {
  /** The configuration home. */
  readonly home: string;
  /** The recorded move it comes from; undefined while none is recorded (the stage's home region). */
  readonly record: ConfigHomeRecord | undefined;
}

/** The configuration home as a region's management API reads and moves it. */
export interface ConfigHomePort {
  /** The configuration home, from this region's replica (cached {@link CONFIG_HOME_CACHE_MS}). */
  current(): Promise<ConfigHomeView>;
  /** The same, read now (what `sluice stage config-home` shows). */
  read(): Promise<ConfigHomeView>;
  /** Records `region` as the configuration home, written in this region; the cache takes it at once. */
  move(input: { readonly region: string; readonly by: string; readonly requestId: string }): Promise<{ readonly before: ConfigHomeView; readonly after: ConfigHomeView }>;
}

function parseRecord(item: Record<string, unknown> | undefined): ConfigHomeRecord | undefined {
  if (item === undefined || typeof item.region !== 'string' || typeof item.generation !== 'number') return undefined;
  return {
    region: item.region,
    generation: item.generation,
    at: typeof item.at === 'number' ? item.at : 0,
    by: typeof item.by === 'string' ? item.by : 'unknown',
    requestId: typeof item.requestId === 'string' ? item.requestId : '',
  };
}

/** The port on DynamoDB: the item in this region's replica of the workspaces table. */
export class DynamoConfigHome implements ConfigHomePort {
  private cached: Cached<ConfigHomeView> | undefined;

  constructor(
    private readonly ctx: AdminContext,
    private readonly setup: RegionSetup,
    private readonly cacheMs: number = CONFIG_HOME_CACHE_MS,
  ) {}

  private view(record: ConfigHomeRecord | undefined): ConfigHomeView {
    return { home: configurationHome(this.setup.regions, record), record };
  }

  async read(): Promise<ConfigHomeView> {
    // Strongly consistent in this region's replica: a move made here is seen at once.
    const got = await this.ctx.doc.send(new GetCommand({ TableName: table(this.ctx, 'workspaces'), Key: CONFIG_HOME_KEY, ConsistentRead: true }));
    const view = this.view(parseRecord(got.Item));
    this.cached = { value: view, readAt: nowOf(this.ctx) };
    return view;
  }

  async current(): Promise<ConfigHomeView> {
    const now = nowOf(this.ctx);
    if (cacheFresh(this.cached, now, this.cacheMs)) return this.cached.value;
    return this.read();
  }

  async move(input: { readonly region: string; readonly by: string; readonly requestId: string }): Promise<{ before: ConfigHomeView; after: ConfigHomeView }> {
    const before = await this.read();
    const record = nextRecord(before.record, { region: input.region, at: nowOf(this.ctx), by: input.by, requestId: input.requestId });
    try {
      await this.ctx.doc.send(
        new PutCommand({
          TableName: table(this.ctx, 'workspaces'),
          Item: { ...CONFIG_HOME_KEY, ...record, writtenIn: this.setup.region },
          // The generation read: another move made here meanwhile wins, this one is told to try again.
          ConditionExpression: before.record === undefined ? 'attribute_not_exists(pk)' : 'generation = :read',
          ...(before.record === undefined ? {} : { ExpressionAttributeValues: { ':read': before.record.generation } }),
        }),
      );
    } catch (err) {
      if (err instanceof Error && err.name === 'ConditionalCheckFailedException') throw new ConcurrentUpdateError('the configuration home');
      throw err;
    }
    const after = this.view(record);
    this.cached = { value: after, readAt: nowOf(this.ctx) };
    return { before, after };
  }
}

/**
 * Refuses a change that writes the stage's home region's ledger items when this management API
 * runs elsewhere (the configuration home moved here): a limit's arming and the marks it takes off
 * again, and the slice count, are written on the home region's items (`limit-arming.ts`,
 * `directory-slices.ts`), which no other region may write (docs/regions.md, "A limit armed while
 * the configuration home is moved").
 */
export function requireHomeRegionItems(ctx: AdminContext, what: string): void {
  const regions = ctx.regions;
  if (regions === undefined || !runsElsewhere(ctx)) return;
  throw new HomeRegionRequiredError(what, homeRegion(regions), regions.region);
}

/**
 * Whether this management API runs outside the stage's home region. It accepts changes only as
 * the configuration home, so for a change being made this means the configuration home was moved here.
 */
export function runsElsewhere(ctx: AdminContext): boolean {
  return ctx.regions !== undefined && ctx.regions.region !== homeRegion(ctx.regions);
}

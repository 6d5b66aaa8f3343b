/**
 * The sweeper Lambda: invoked by an EventBridge schedule every minute (locally, by a timer calling
 * this same handler). The event carries nothing the sweep needs; the clock decides what expired.
 * Adapters are built once, at cold start, from the validated configuration. A `@middy/core`
 * handler; middy's early timeout is off because the sweep keeps its own margin ({@link SAFETY_MS}).
 */
import middy from '@middy/core';
import type { Context, ScheduledEvent } from 'aws-lambda';
import { DynamoLedger } from '../adapters/dynamo-ledger';
import { documentClient } from '../adapters/dynamo-client';
import { loadConfig } from '../shared/config';
import { tableName } from '../shared/schema';
import { RegionalLedger } from '../store/regions-ledger';
import { markAlive } from '../store/regions-alive';
import { regionSetupFromEnv, regionTag } from '../store/regions';
import { sweep, type SweepDeps } from './sweep';

/** Thrown after a run in which some expired holds could not be settled, so the function's Errors metric (and its alarm) sees it. */
export class SweepIncompleteError extends Error {
  override readonly name = 'SweepIncompleteError';
}

/** Time kept back from the function's timeout: the last settlement started must still finish. */
const SAFETY_MS = 10_000;

const config = loadConfig();
const doc = documentClient(config);
const t = (name: Parameters<typeof tableName>[1]): string => tableName(config.tablePrefix, name);
let conflicts = 0;
const onConflict = (): void => {
  conflicts += 1;
};
const ledgerTables = { ledger: t('ledger'), usage: t('usage'), usageRetentionDays: config.usageRetentionDays };
// In a stage with several regions, this region's sweeper settles only its own holds, on its own slices.
const regions = regionSetupFromEnv();
const deps: SweepDeps = {
  // Local mode reports sweeps on its own console line; EMF is for CloudWatch.
  ...(config.stage === 'local' ? { writeLine: () => undefined } : {}),
  doc,
  usageTable: t('usage'),
  ledger: regions === undefined ? new DynamoLedger(doc, ledgerTables, onConflict) : new RegionalLedger(doc, ledgerTables, regions, onConflict),
  ...(regions === undefined ? {} : { region: { name: regions.region, tag: regionTag(regions) } }),
  stage: config.stage,
  takeConflicts: () => {
    const n = conflicts;
    conflicts = 0;
    return n;
  },
};

/** What the sweep reads of its invocation context (the local timer and tests pass only this). */
export type SweepContext = Partial<Pick<Context, 'getRemainingTimeInMillis'>>;

/**
 * Settles every expired hold (and, with several regions, marks this one alive). Resolves to how many this run settled; rejects with
 * {@link SweepIncompleteError} when some could not be (they stay open for the next tick).
 */
async function sweepOnce(_event: ScheduledEvent | unknown, context?: SweepContext): Promise<{ swept: number }> {
  const now = Date.now();
  const remaining = context?.getRemainingTimeInMillis?.();
  // In a stage with several regions, every run marks this region alive (the top-up spread reads it
  // elsewhere); a failed mark fails the run after the sweep, never instead of it.
  const marked = regions === undefined ? undefined : markAlive(doc, t('ledger'), regions.region, now).then(() => undefined, (err: unknown) => err);
  const result = await sweep(remaining === undefined ? deps : { ...deps, deadline: now + remaining - SAFETY_MS }, now);
  if (result.failed > 0) throw new SweepIncompleteError(`${result.failed} expired hold(s) could not be settled; the next run tries again`);
  const markFailed = await marked;
  if (markFailed !== undefined) throw markFailed;
  return { swept: result.swept };
}

/** The sweeper's Lambda handler. */
export const handler = middy(sweepOnce, { timeoutEarlyInMillis: 0 }) as unknown as (event: ScheduledEvent | unknown, context?: SweepContext) => Promise<{ swept: number }>;

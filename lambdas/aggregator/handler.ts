/**
 * The aggregator Lambda: triggered by the usage table's stream (NEW_IMAGE) with
 * `ReportBatchItemFailures`; locally, the stream poller calls this same handler. Adapters are
 * built once, at cold start, from the validated configuration.
 */
import middy from '@middy/core';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { documentClient } from '../adapters/dynamo-client';
import { loadConfig } from '../shared/config';
import { tableName } from '../shared/schema';
import { regionSetupFromEnv, regionTag } from '../store/regions';
import { aggregate, type AggregateDeps } from './aggregate';

const config = loadConfig();
// In a stage with several regions, each region's aggregator counts only its own rows.
const regions = regionSetupFromEnv();
const deps: AggregateDeps = {
  doc: documentClient(config),
  rollupsTable: tableName(config.tablePrefix, 'rollups'),
  ...(regions === undefined ? {} : { region: { name: regions.region, tag: regionTag(regions) } }),
};

/** Rolls up one batch of usage records; failures come back as `batchItemFailures` (partial batch response). A `@middy/core` handler. */
export const handler = middy((event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => aggregate(deps, event)) as unknown as (
  event: DynamoDBStreamEvent,
) => Promise<DynamoDBBatchResponse>;

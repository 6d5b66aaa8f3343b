/**
 * The transfer agent Lambda of one region of a stage with several (docs/regions.md): triggered
 * by its region's replica of the ledger table's stream (NEW_IMAGE, filtered to other regions'
 * transfer items by `transferFilters` in `lib/transfer-agent.ts`, `ReportBatchItemFailures`; the
 * agent checks each record again itself). Needs
 * `SLUICE_REGIONS` and `SLUICE_REGION` (or `AWS_REGION`); locally, `local/regions/transfer-agent.ts`
 * polls the stream and calls the same use case.
 */
import middy from '@middy/core';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { documentClient } from '../adapters/dynamo-client';
import { loadConfig } from '../shared/config';
import { tableName } from '../shared/schema';
import { RegionConfigError, regionSetupFromEnv } from '../store/regions';
import { RegionTransfers } from '../store/regions-transfers';
import { handleTransferRecords } from './agent';

const config = loadConfig();
const regions = regionSetupFromEnv();
if (regions === undefined) throw new RegionConfigError('the transfer agent runs only in a stage with several regions (SLUICE_REGIONS)');
const transfers = new RegionTransfers(documentClient(config), { ledger: tableName(config.tablePrefix, 'ledger'), usage: tableName(config.tablePrefix, 'usage') }, regions);

/** Credits what other regions sent here and answers what they asked, for one batch of ledger stream records. */
export const handler = middy((event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> => handleTransferRecords(transfers, event)) as unknown as (
  event: DynamoDBStreamEvent,
) => Promise<DynamoDBBatchResponse>;

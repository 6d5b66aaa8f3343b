/**
 * A region's transfer agent in local mode: polls that region's DynamoDB Local ledger stream and
 * hands each batch to the same use case the deployed agent runs (`lambdas/transfer/agent.ts`).
 * `npm run start:regions` starts one per region; tests start them directly.
 */
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../../lambdas/adapters/dynamo-wire';
import { handleTransferRecords } from '../../lambdas/transfer/agent';
import { tableName } from '../../lambdas/shared/schema';
import { asRegion, type RegionSetup } from '../../lambdas/store/regions';
import { RegionTransfers } from '../../lambdas/store/regions-transfers';
import { startStreamPoller, type StreamPoller } from '../stream-poller';
import { makeDynamoClient } from '../tables';

/** Options for {@link startTransferAgent}. */
export interface LocalTransferAgentOptions {
  /** The region's DynamoDB Local. */
  readonly endpoint: string;
  readonly tablePrefix: string;
  /** The stage's regions (as `regionSetupFromEnv` reads them); the agent runs as `region`. */
  readonly setup: RegionSetup;
  readonly region: string;
  /** Pause between stream polls, milliseconds. @default 100 */
  readonly intervalMs?: number;
  /** @default console.error */
  readonly log?: (message: string) => void;
  /** Wraps the client the agent writes through (tests record every write with it). @default as is */
  readonly wrap?: (doc: DocumentSender) => DocumentSender;
}

/** A running local transfer agent. */
export interface LocalTransferAgent {
  readonly transfers: RegionTransfers;
  readonly poller: StreamPoller;
  stop(): Promise<void>;
}

/** Starts a region's transfer agent on its DynamoDB Local (the ledger table must have a stream, as it has when replicated). */
export async function startTransferAgent(options: LocalTransferAgentOptions): Promise<LocalTransferAgent> {
  const client = makeDynamoClient(options.endpoint);
  const doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
  const ledger = tableName(options.tablePrefix, 'ledger');
  const transfers = new RegionTransfers(options.wrap === undefined ? doc : options.wrap(doc), { ledger, usage: tableName(options.tablePrefix, 'usage') }, asRegion(options.setup, options.region));
  const poller = await startStreamPoller({
    endpoint: options.endpoint,
    tableName: ledger,
    intervalMs: options.intervalMs ?? 100,
    batchSize: 1000,
    discoverEveryMs: 5_000,
    handler: (event) => handleTransferRecords(transfers, event),
    ...(options.log !== undefined ? { log: options.log } : {}),
  });
  return {
    transfers,
    poller,
    stop: async () => {
      await poller.stop();
      client.destroy();
    },
  };
}

/**
 * The low-credit notifier Lambda: invoked by an EventBridge schedule (every few minutes), never
 * by a request. Adapters are built once, at cold start, from the validated configuration.
 */
import { randomUUID } from 'node:crypto';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { SNSClient } from '@aws-sdk/client-sns';
import middy from '@middy/core';
import type { ScheduledEvent } from 'aws-lambda';
import { documentClient } from '../adapters/dynamo-client';
import { loadConfig } from '../shared/config';
import { tableName } from '../shared/schema';
import { checkLowCredit, type CheckDeps, type CheckResult } from './check';
import { DynamoNoticeStore, availableCredit } from '../store/notices';
import { regionSetupFromEnv } from '../store/regions';
import { NOTIFIER_ENV } from './env';
import { EventBridgePublisher, NoticeChannels, SnsPublisher } from './publishers';
import type { NoticePublisher } from './ports';

const config = loadConfig();
const doc = documentClient(config);
const log = (line: string): void => void process.stdout.write(`${line}\n`);
const topicArn = process.env[NOTIFIER_ENV.topicArn] || undefined;
const others: NoticePublisher[] = topicArn === undefined ? [] : [new SnsPublisher(new SNSClient({}), topicArn)];
const deps: CheckDeps = {
  store: new DynamoNoticeStore(doc, tableName(config.tablePrefix, 'workspaces')),
  readBalance: availableCredit(doc, {
    ledger: tableName(config.tablePrefix, 'ledger'),
    usage: tableName(config.tablePrefix, 'usage'),
  }, regionSetupFromEnv()),
  publisher: new NoticeChannels(new EventBridgePublisher(new EventBridgeClient({}), process.env[NOTIFIER_ENV.eventBusName] || 'default'), others, (err) =>
    log(JSON.stringify({ level: 'error', event: 'low_credit_sns_failed', fault: err instanceof Error ? err.name : typeof err })),
  ),
  newId: () => `lc_${randomUUID()}`,
  stage: config.stage,
  writeLine: log,
};

/** Runs one check of every workspace with a threshold. */
function checkOnce(_event: ScheduledEvent | unknown): Promise<CheckResult> {
  return checkLowCredit(deps, Date.now());
}

/** The notifier's Lambda handler, a `@middy/core` handler like every function's. */
export const handler = middy(checkOnce) as unknown as (event: ScheduledEvent | unknown) => Promise<CheckResult>;

/**
 * The SDK controls: the client-side CPU of one TransactWriteItems over the AWS SDK's
 * DocumentClient (what the gateway used before) and over its low-level DynamoDBClient with
 * pre-marshalled input (`../sdk-low-level.ts`, the alternative to DynamoWire), the floor's
 * admission and settlement on the floor's workspace.
 */
import { DynamoLedger } from '../../lambdas/adapters/dynamo-ledger';
import type { DocumentSender } from '../../lambdas/adapters/dynamo-wire';
import type { Plan } from '../args';
import { benchTables } from '../floor';
import { countRoundTrips } from '../round-trips';
import { LowLevelSender } from '../sdk-low-level';
import { log, type Stack } from '../stack';
import { TABLE_PREFIX } from './requests';

export interface SdkControls {
  /** CPU of each call that took one round trip, after 20 unmeasured ones. Microseconds. */
  readonly sdkCpuUs: number[];
  readonly lowLevelCpuUs: number[];
}

/** `plan.sdkCalls` admissions and settlements over `client`, after 20 that warm it up. */
async function callsOver(stack: Stack, plan: Plan, client: DocumentSender, what: string): Promise<number[]> {
  const trips = countRoundTrips([client], TABLE_PREFIX);
  const ledger = new DynamoLedger(client, benchTables());
  const cpuUs: number[] = [];
  for (let i = 0; i < plan.sdkCalls + 20; i += 1) {
    const now = Date.now();
    const c0 = process.cpuUsage();
    const before = trips.ledger;
    const outcome = await ledger.admit(stack.floor.admission(now));
    const cpu = process.cpuUsage(c0);
    if (!outcome.admitted) throw new Error(`the ${what} control's admission was refused: ${outcome.refusal.kind}`);
    if (i >= 20 && trips.ledger - before === 1) cpuUs.push(cpu.user + cpu.system);
    await ledger.settle(outcome.hold, { counts: undefined, chargeMicros: 1_000, stream: false, status: 200, outcome: 'ok', attempts: 1, now: Date.now() });
  }
  return cpuUs;
}

/** Runs the two SDK controls, DocumentClient first, each `plan.sdkCalls` measured calls. */
export async function sdkControls(stack: Stack, plan: Plan): Promise<SdkControls> {
  log(`control: the AWS SDK client's CPU per TransactWriteItems (${plan.sdkCalls} calls)`);
  const sdkCpuUs = await callsOver(stack, plan, stack.doc, 'SDK');

  log(`control: the SDK's low-level DynamoDBClient, input in attribute values, CPU per TransactWriteItems (${plan.sdkCalls} calls)`);
  const lowLevel = new LowLevelSender(stack.db.endpoint);
  stack.cleanup.add('low-level SDK client', async () => lowLevel.destroy());
  const lowLevelCpuUs = await callsOver(stack, plan, lowLevel, 'low-level');
  return { sdkCpuUs, lowLevelCpuUs };
}

/**
 * The benchmark's second control for DynamoWire: the AWS SDK's low-level `DynamoDBClient` sent
 * `TransactWriteItemsCommand` with input already in attribute values, so the DocumentClient's
 * marshalling middleware is out of the figure. Both sides marshal the same way (util-dynamodb,
 * as DynamoWire does), so what differs is the client: DynamoWire's one signed POST against the
 * SDK's middleware stack (endpoint rules, serde, retry bookkeeping, signing, its HTTP handler).
 */
import { DynamoDBClient, TransactWriteItemsCommand, type TransactWriteItem } from '@aws-sdk/client-dynamodb';
import { TransactWriteCommand, type TransactWriteCommandOutput } from '@aws-sdk/lib-dynamodb';
import { marshall, type NativeAttributeValue } from '@aws-sdk/util-dynamodb';
import type { DocumentSender } from '../lambdas/adapters/dynamo-wire';

type Entry = Record<string, unknown>;
const MARSHAL = { removeUndefinedValues: true } as const;

function marshalEntry(entry: Entry): Entry {
  const out: Entry = { ...entry };
  for (const field of ['Key', 'Item', 'ExpressionAttributeValues']) {
    if (entry[field] !== undefined) out[field] = marshall(entry[field] as Record<string, NativeAttributeValue>, MARSHAL);
  }
  return out;
}

/** A `DocumentSender` for transactions only, over the low-level client (what admission and settlement send). */
export class LowLevelSender implements DocumentSender {
  readonly client: DynamoDBClient;

  constructor(endpoint: string) {
    this.client = new DynamoDBClient({ endpoint, region: 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  }

  send(command: TransactWriteCommand): Promise<TransactWriteCommandOutput>;
  send(command: never): Promise<never>;
  async send(command: unknown): Promise<unknown> {
    if (!(command instanceof TransactWriteCommand)) throw new TypeError('the low-level control sends transactions only');
    const items = (command.input.TransactItems ?? []).map((item) => {
      const out: Entry = {};
      for (const [kind, entry] of Object.entries(item)) if (entry !== undefined) out[kind] = marshalEntry(entry as Entry);
      return out as TransactWriteItem;
    });
    return this.client.send(new TransactWriteItemsCommand({ ...command.input, TransactItems: items }));
  }

  destroy(): void {
    this.client.destroy();
  }
}

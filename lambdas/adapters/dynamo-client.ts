/**
 * The DynamoDB clients every function builds once at cold start: DynamoDB Local when an endpoint
 * is configured (local mode, tests), the Lambda's own region and role otherwise.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { RuntimeConfig } from '../shared/config';
import { DynamoWire, type DynamoWireOptions } from './dynamo-wire';

const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

/**
 * The SDK waits forever for an answer by default; a catalog or profile read against a store that
 * stopped answering would then hold its request to the function's timeout. Limited, the read fails
 * and the request is refused with a 503 that clears on its own.
 */
const SDK_TIMEOUTS = { connectionTimeout: 1_000, requestTimeout: 3_000 } as const;

export function documentClient(config: Pick<RuntimeConfig, 'dynamoEndpoint'>): DynamoDBDocumentClient {
  const client = new DynamoDBClient(
    config.dynamoEndpoint === undefined
      ? { requestHandler: SDK_TIMEOUTS }
      : { endpoint: config.dynamoEndpoint, region: 'local', credentials: LOCAL_CREDENTIALS, requestHandler: SDK_TIMEOUTS },
  );
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

/**
 * The lean client for the gateway's per-request calls, on the same endpoint, region and
 * credentials as the SDK client `doc` (whose providers cache and refresh the role's credentials).
 */
export function wireClient(
  config: Pick<RuntimeConfig, 'dynamoEndpoint'>,
  doc: DynamoDBDocumentClient,
  env: NodeJS.ProcessEnv = process.env,
  limits: Pick<DynamoWireOptions, 'attemptTimeoutMs' | 'callBudgetMs' | 'maxAttempts' | 'maxSockets'> = {},
): DynamoWire {
  if (config.dynamoEndpoint !== undefined) {
    return new DynamoWire({ endpoint: config.dynamoEndpoint, region: 'local', credentials: () => Promise.resolve(LOCAL_CREDENTIALS), ...limits });
  }
  const region = env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  if (region === undefined) throw new Error('AWS_REGION is not set');
  const sdk = doc.config;
  const endpoint = sdk.endpointProvider({ Region: region, UseFIPS: false, UseDualStack: false, AccountIdEndpointMode: 'disabled' }).url.href;
  return new DynamoWire({ endpoint, region, credentials: () => sdk.credentials(), ...limits });
}

/**
 * The DynamoDB DocumentClient every function builds once at cold start: DynamoDB Local when an
 * endpoint is configured (local mode, tests), the Lambda's own region and role otherwise.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { RuntimeConfig } from '../shared/config';

export function documentClient(config: Pick<RuntimeConfig, 'dynamoEndpoint'>): DynamoDBDocumentClient {
  const client = new DynamoDBClient(
    config.dynamoEndpoint === undefined
      ? {}
      : { endpoint: config.dynamoEndpoint, region: 'local', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } },
  );
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

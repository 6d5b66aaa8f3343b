/**
 * Lambda entry of the gateway behind a Function URL in RESPONSE_STREAM mode. Thin: the adapters
 * are built once at module scope (cold start), each invocation is decoded and served by the core.
 */
import type { Writable } from 'node:stream';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { loadConfig } from '../shared/config';
import { buildGateway, eventToRequest, lambdaSink, type AwsLambdaRuntime } from './wiring';

// The AWS SDK itself leaves an empty `globalThis.awslambda` behind, so check for the function.
const found = (globalThis as unknown as { awslambda?: Partial<AwsLambdaRuntime> }).awslambda;
if (typeof found?.streamifyResponse !== 'function') throw new Error('The awslambda streaming runtime is missing (install the local shim first).');
const runtime = found as AwsLambdaRuntime;

const config = loadConfig();
const { gateway } = buildGateway(config, process.env);

export const handler = runtime.streamifyResponse(async (event: APIGatewayProxyEventV2, responseStream: Writable, context: Context) => {
  await gateway.serve(eventToRequest(event, context.awsRequestId), lambdaSink(runtime, responseStream));
});

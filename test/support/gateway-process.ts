/**
 * The gateway in a process of its own, for the soak test's SIGKILL between admission and
 * settlement: the real handler behind the local HTTP layer, configured from the environment
 * (SLUICE_* as local mode sets them). Prints `listening <url>` once it serves.
 */
import { loadConfig } from '../../lambdas/shared/config';
import { silentTelemetry } from '../../lambdas/adapters/emf-telemetry';
import { buildGateway, eventToRequest, lambdaSink, type AwsLambdaRuntime } from '../../lambdas/gateway/wiring';
import { localAwslambda } from '../../local/lambda-shim';
import { serveLambda, type StreamingHandler } from '../../local/http-server';

async function main(): Promise<void> {
  const wiring = buildGateway(loadConfig(process.env), process.env, { telemetry: silentTelemetry });
  const runtime = localAwslambda;
  const handler = runtime.streamifyResponse(async (event, responseStream, context) => {
    await wiring.gateway.serve(eventToRequest(event, context.awsRequestId), lambdaSink(runtime as unknown as AwsLambdaRuntime, responseStream));
  }) as StreamingHandler;
  const server = await serveLambda({ handler, log: () => undefined });
  process.stdout.write(`listening ${server.url}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.name : 'fault'}\n`);
  process.exit(1);
});

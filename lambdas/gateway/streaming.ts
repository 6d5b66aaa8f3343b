/**
 * The gateway's Lambda handler for a Function URL in RESPONSE_STREAM mode: the runtime's own
 * `awslambda.streamifyResponse`, each invocation served by the use case straight into the
 * response stream (`lambdaSink`: status and headers as the prelude on the first write, then each
 * chunk with the stream's backpressure), and the invocation ending only once the request is served
 * in full, settlement included. Where no runtime provides `awslambda` (tests, a plain Node
 * process) a fallback that writes the Function URL's own wire format is installed first, in the
 * manner of Powertools' `globalThis.awslambda?.streamifyResponse ?? fallback`.
 *
 * Until issue 21 this was a `@middy/core` handler with middy's response streaming, which pipes a
 * Readable into the response stream with `stream.pipeline`: per request an AbortController, its
 * DOMException at the end, end-of-stream listeners and a Readable, and twice the objects outliving
 * their request into the old generation. Measured in docs/gateway.md; `bench/middy-streaming.ts`
 * keeps that handler for the comparison. No middleware ran on the gateway: middy's early timeout
 * was off (the gateway owns its deadline, DESIGN decision 8) and the metrics are the EMF line.
 */
import type { Writable } from 'node:stream';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import type { Gateway } from './app';
import { eventToRequest, lambdaSink, type AwsLambdaRuntime } from './wiring';

/** The runtime's marks on a streaming handler (public symbol keys). */
const HANDLER_STREAMING = Symbol.for('aws.lambda.runtime.handler.streaming');
const PRELUDE_CONTENT_TYPE = 'application/vnd.awslambda.http-integration-response';
const PRELUDE_DELIMITER = new Uint8Array(8);

interface StreamingGlobal {
  streamifyResponse?: unknown;
  HttpResponseStream?: unknown;
}

/** Installs the fallback `awslambda` where no runtime provides one; a runtime's own is left alone. */
export function ensureStreamingRuntime(): void {
  const holder = globalThis as unknown as { awslambda?: StreamingGlobal };
  // The AWS SDK leaves an empty `awslambda` object behind: fill it rather than replace it.
  const target = (holder.awslambda ??= {});
  if (typeof target.streamifyResponse === 'function') return;
  target.streamifyResponse = <H extends object>(handler: H): H => Object.assign(handler, { [HANDLER_STREAMING]: 'response' });
  target.HttpResponseStream = {
    from(stream: Writable & { setContentType?: (type: string) => void }, prelude: Readonly<Record<string, unknown>>): Writable {
      stream.setContentType?.(PRELUDE_CONTENT_TYPE);
      stream.write(JSON.stringify(prelude));
      stream.write(PRELUDE_DELIMITER);
      return stream;
    },
  };
}

/** A streaming Lambda handler as the runtime invokes it. */
export type StreamingLambdaHandler = (event: APIGatewayProxyEventV2, responseStream: Writable, context: Context) => Promise<void>;

/** The gateway's Lambda handler (see the module comment). */
export function streamingHandler(gateway: Gateway): StreamingLambdaHandler {
  ensureStreamingRuntime();
  const runtime = (globalThis as unknown as { awslambda: AwsLambdaRuntime }).awslambda;
  return runtime.streamifyResponse(async (event: APIGatewayProxyEventV2, responseStream: Writable, context: Context): Promise<void> => {
    const sink = lambdaSink(runtime, responseStream);
    await gateway.serve(eventToRequest(event, context.awsRequestId), sink);
    // `serve` always answers; should it ever not, the invocation still gets a response.
    if (!sink.started) {
      sink.start(500, {});
      await sink.end();
    }
  });
}

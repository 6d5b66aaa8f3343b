/**
 * The gateway's Lambda handler as it was until issue 21: a `@middy/core` handler with middy's
 * response streaming. Kept here, out of the product, so `own-cpu.ts` can still say what it cost
 * against the handler deployed now (`lambdas/gateway/streaming.ts`): middy pipes a Readable into
 * the response stream with `stream.pipeline`, whose per-request AbortController, end-of-stream
 * listeners and objects outlive the request until a full collection (docs/gateway.md).
 *
 * middy's streaming wants the status and headers as the handler's return value, but the gateway
 * knows its status only once a provider answers, and settles after the reply ends. So the handler
 * returns when the gateway starts its response (the body then flows through a Readable that
 * middy pipes to the client with backpressure), and middy's `requestEnd` hook waits for the
 * request to be served in full, settlement included, before the invocation ends.
 */
import { Readable } from 'node:stream';
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import type { Gateway } from '../lambdas/gateway/app';
import type { ResponseSink } from '../lambdas/gateway/ports';
import { ensureStreamingRuntime, type StreamingLambdaHandler } from '../lambdas/gateway/streaming';
import { eventToRequest } from '../lambdas/gateway/wiring';

/** What middy's streaming takes from a handler: status, headers, and the body as a stream. */
interface StreamedResult {
  readonly statusCode: number;
  readonly headers: Record<string, string>;
  readonly body: Readable;
}

/**
 * A sink over a push-fed Readable (lighter than a PassThrough, which adds a Transform's machinery
 * per chunk): `start` hands status and headers to `started`; a chunk the body takes at once costs
 * no promise, otherwise the write waits until middy's pipeline reads again (backpressure); a write
 * after the body was destroyed (the client side broke) rejects.
 */
function bodySink(body: Readable, wakeOnRead: { wake?: () => void }, started: (status: number, headers: Record<string, string>) => void): ResponseSink {
  const sink: ResponseSink & { started: boolean } = {
    started: false,
    start(status, headers) {
      sink.started = true;
      started(status, { ...headers });
    },
    write(chunk) {
      if (body.destroyed) return Promise.reject(new Error('the response stream is closed'));
      if (body.push(chunk)) return undefined;
      return new Promise<void>((resolve, reject) => {
        const onClose = (): void => reject(new Error('the response stream closed'));
        body.once('close', onClose);
        wakeOnRead.wake = () => {
          body.off('close', onClose);
          resolve();
        };
      });
    },
    end() {
      if (!body.destroyed && !body.readableEnded) body.push(null);
      return Promise.resolve();
    },
  };
  return sink;
}

/** The gateway's Lambda handler until issue 21: middy with response streaming. */
export function middyStreamingHandler(gateway: Gateway): StreamingLambdaHandler {
  ensureStreamingRuntime();
  /** Each invocation's whole serving, settlement included, by its context. */
  const serving = new WeakMap<object, Promise<void>>();
  const handler = middy<APIGatewayProxyEventV2, StreamedResult>({
    streamifyResponse: true,
    // The gateway owns its deadline (DESIGN decision 8); middy's early timeout would cut settlement,
    // and it aborts one AbortController @middy/core shares between every invocation of the process
    // (many at once on Lambda Managed Instances). Off, that controller is never aborted.
    timeoutEarlyInMillis: 0,
    requestEnd: (request) => serving.get(request.context),
  }).handler(
    (event: APIGatewayProxyEventV2, context: Context) =>
      new Promise<StreamedResult>((resolve) => {
        const wakeOnRead: { wake?: () => void } = {};
        const body = new Readable({
          read() {
            const wake = wakeOnRead.wake;
            wakeOnRead.wake = undefined;
            wake?.();
          },
        });
        const sink = bodySink(body, wakeOnRead, (statusCode, headers) => resolve({ statusCode, headers, body }));
        const served = gateway.serve(eventToRequest(event, context.awsRequestId), sink).then(() => {
          // `serve` always answers; should it ever not, the invocation still gets a response.
          if (!sink.started) {
            body.push(null);
            resolve({ statusCode: 500, headers: {}, body });
          }
        });
        serving.set(context, served);
      }),
  );
  // middy's types describe only the buffered shape; with `streamifyResponse` the function it
  // returns is the runtime's streaming one, (event, responseStream, context).
  return handler as unknown as StreamingLambdaHandler;
}

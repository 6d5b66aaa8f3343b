/**
 * The gateway as a `@middy/core` handler with middy's response streaming. middy calls the
 * runtime's global `awslambda` (`streamifyResponse` when built, `HttpResponseStream.from` per
 * request); where that global is missing (tests, a plain Node process) a fallback that writes
 * the Function URL's own wire format is installed first, in the manner of Powertools'
 * `globalThis.awslambda?.streamifyResponse ?? fallback`.
 *
 * middy's streaming wants the status and headers as the handler's return value, but the gateway
 * knows its status only once a provider answers, and settles after the reply ends. So the handler
 * returns when the gateway starts its response (the body then flows through a Readable that
 * middy pipes to the client with backpressure), and middy's `requestEnd` hook waits for the
 * request to be served in full, settlement included, before the invocation ends.
 */
import { Readable, type Writable } from 'node:stream';
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import type { Gateway } from './app';
import type { ResponseSink } from './ports';
import { eventToRequest } from './wiring';

/** What middy's streaming takes from a handler: status, headers, and the body as a stream. */
export interface StreamedResult {
  readonly statusCode: number;
  readonly headers: Record<string, string>;
  readonly body: Readable;
}

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

/** A streaming Lambda handler as the runtime invokes it. */
export type StreamingLambdaHandler = (event: APIGatewayProxyEventV2, responseStream: Writable, context: Context) => Promise<void>;

/** The gateway's Lambda handler: middy with response streaming. */
export function streamingHandler(gateway: Gateway): StreamingLambdaHandler {
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

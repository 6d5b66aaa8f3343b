/**
 * The part of the Lambda Node.js runtime that streaming handlers touch: the global `awslambda`
 * (`streamifyResponse`, `HttpResponseStream.from`) and the response stream itself. Local mode
 * and tests run the deployed handlers through this, so it copies the runtime's behaviour,
 * quirks included (see {@link RuntimeResponseStream}), rather than improving on it: a handler
 * that works here must work when deployed.
 *
 * Types: `@types/aws-lambda` already declares the global namespace `awslambda`; declaring it
 * again would clash, so this module describes what it installs with its own interface.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import type { Context } from 'aws-lambda';

/** Content type by which the runtime tells a Function URL that the body starts with a prelude. */
export const METADATA_PRELUDE_CONTENT_TYPE = 'application/vnd.awslambda.http-integration-response';
/** The prelude ends with this many NUL bytes (JSON never contains one). */
export const PRELUDE_DELIMITER_LENGTH = 8;
/** Content type of a streamed response that never set one (the runtime's default). */
export const DEFAULT_STREAM_CONTENT_TYPE = 'application/octet-stream';

/** The runtime marks streaming handlers with these symbols; the same keys are used here. */
const HANDLER_STREAMING = Symbol.for('aws.lambda.runtime.handler.streaming');
const HANDLER_HIGHWATERMARK = Symbol.for('aws.lambda.runtime.handler.streaming.highWaterMark');
const STREAM_RESPONSE = 'response';

/** Writes raw bytes ahead of the handler's first chunk; the runtime's `_onBeforeFirstWrite` hook. */
export type BeforeFirstWrite = (write: (chunk: string | Uint8Array) => void) => void;

/** A stream `HttpResponseStream.from` can decorate: the runtime's response stream. */
export interface PreludeCapableStream extends Writable {
  setContentType(contentType: string): void;
  _onBeforeFirstWrite?: BeforeFirstWrite;
}

/** Options `streamifyResponse` accepts in the runtime. */
export interface StreamifyOptions {
  readonly highWaterMark?: number;
}

/** What this module installs as `globalThis.awslambda`. */
export interface LambdaStreamingRuntime {
  streamifyResponse<H extends (...args: never[]) => unknown>(handler: H, options?: StreamifyOptions): H;
  readonly HttpResponseStream: {
    from(stream: Writable, prelude: Readonly<Record<string, unknown>>): Writable;
  };
}

/** Thrown, as by the runtime, when the content type is set after the first write. */
export class InvalidStreamingOperation extends Error {
  override readonly name = 'InvalidStreamingOperation';
}

/** The runtime's `HttpResponseStream`: only `from`, which installs the prelude hook. */
export class HttpResponseStream {
  /**
   * Sets the prelude content type and arranges for the JSON metadata and its delimiter to be
   * written just before the first `write()`. As in the runtime, `end(chunk)` does not go
   * through `write()`, so a stream ended without a prior write loses its prelude.
   */
  static from(stream: Writable, prelude: Readonly<Record<string, unknown>>): Writable {
    const target = stream as PreludeCapableStream;
    if (typeof target.setContentType !== 'function') {
      throw new TypeError('HttpResponseStream.from needs the response stream the runtime passed to the handler');
    }
    target.setContentType(METADATA_PRELUDE_CONTENT_TYPE);
    const metadata = JSON.stringify(prelude);
    target._onBeforeFirstWrite = (write) => {
      write(metadata);
      write(new Uint8Array(PRELUDE_DELIMITER_LENGTH));
    };
    return stream;
  }
}

function streamifyResponse<H extends (...args: never[]) => unknown>(handler: H, options?: StreamifyOptions): H {
  const marked = handler as H & { [HANDLER_STREAMING]?: string; [HANDLER_HIGHWATERMARK]?: number };
  marked[HANDLER_STREAMING] = STREAM_RESPONSE;
  if (typeof options?.highWaterMark === 'number') marked[HANDLER_HIGHWATERMARK] = Math.trunc(options.highWaterMark);
  return handler;
}

/** The shim's own `awslambda` object (whether or not it is the one installed). */
export const localAwslambda: LambdaStreamingRuntime = Object.freeze({ streamifyResponse, HttpResponseStream });

/**
 * Makes `globalThis.awslambda` carry this shim's `streamifyResponse` and `HttpResponseStream`,
 * unless a runtime already provides them, and returns it. The object may already exist without
 * them: the AWS SDK creates `globalThis.awslambda = {}` for its invoke store, so the functions
 * are added to it, not swapped for a new object. Call this before importing a handler module,
 * since handlers wrap themselves at module load.
 */
export function installLambdaShim(): LambdaStreamingRuntime {
  const holder = globalThis as unknown as { awslambda?: Partial<Record<keyof LambdaStreamingRuntime, unknown>> };
  const target = (holder.awslambda ??= {});
  if (typeof target.streamifyResponse !== 'function') {
    target.streamifyResponse = localAwslambda.streamifyResponse;
    target.HttpResponseStream = localAwslambda.HttpResponseStream;
  }
  return target as LambdaStreamingRuntime;
}

/** Whether a handler was wrapped by `streamifyResponse` (this shim's or the runtime's). */
export function isStreamingHandler(handler: unknown): boolean {
  return typeof handler === 'function' && (handler as { [HANDLER_STREAMING]?: unknown })[HANDLER_STREAMING] === STREAM_RESPONSE;
}

/** The high-water mark a handler asked for in `streamifyResponse`, if any. */
export function streamingHighWaterMark(handler: unknown): number | undefined {
  if (typeof handler !== 'function') return undefined;
  const value = (handler as { [HANDLER_HIGHWATERMARK]?: unknown })[HANDLER_HIGHWATERMARK];
  return typeof value === 'number' && value > 0 ? value : undefined;
}

/**
 * Where the runtime's response stream delivers bytes: for a Function URL, the HTTP response.
 * `contentType` is the value in force for the whole response (it cannot change after the first
 * write). `done` is the write callback, so a sink applies backpressure by calling it late.
 */
export interface StreamDestination {
  write(contentType: string, chunk: Buffer, done: () => void): void;
  end(contentType: string, done: () => void): void;
}

type WriteCallback = (error: Error | null | undefined) => void;

/**
 * The response stream the runtime hands a streaming handler. Like the runtime's:
 * - `setContentType` throws once the first `write()` happened;
 * - the `_onBeforeFirstWrite` hook runs inside the first `write()` only (not inside `end(chunk)`);
 * - chunks that are neither strings nor bytes are JSON-encoded.
 */
export class RuntimeResponseStream extends Writable implements PreludeCapableStream {
  _onBeforeFirstWrite?: BeforeFirstWrite;
  private contentType = DEFAULT_STREAM_CONTENT_TYPE;
  private written = false;

  constructor(
    private readonly sink: StreamDestination,
    highWaterMark?: number,
  ) {
    super(highWaterMark === undefined ? {} : { highWaterMark });
  }

  setContentType(contentType: string): void {
    if (this.written) throw new InvalidStreamingOperation('Cannot set content-type, too late.');
    this.contentType = contentType;
  }

  override write(chunk: unknown, encodingOrCallback?: BufferEncoding | WriteCallback, callback?: WriteCallback): boolean {
    const data = typeof chunk === 'string' || chunk instanceof Uint8Array ? chunk : JSON.stringify(chunk);
    if (!this.written && typeof this._onBeforeFirstWrite === 'function') {
      this._onBeforeFirstWrite((raw) => {
        super.write(raw);
      });
    }
    this.written = true;
    if (typeof encodingOrCallback === 'function') return super.write(data, encodingOrCallback);
    if (encodingOrCallback === undefined) return super.write(data, callback);
    return super.write(data, encodingOrCallback, callback);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: WriteCallback): void {
    this.sink.write(this.contentType, chunk, () => callback(null));
  }

  override _final(callback: WriteCallback): void {
    this.sink.end(this.contentType, () => callback(null));
  }
}

/** Options for {@link makeLambdaContext}. */
export interface LambdaContextOptions {
  readonly functionName: string;
  /** The function's timeout, for `getRemainingTimeInMillis`. @default 900000 */
  readonly timeoutMs?: number;
  /** @default a random UUID */
  readonly awsRequestId?: string;
  /** @default 1024 */
  readonly memoryLimitInMB?: number;
}

/** A Lambda `Context` for one local invocation. */
export function makeLambdaContext(options: LambdaContextOptions): Context {
  const deadline = Date.now() + (options.timeoutMs ?? 900_000);
  const awsRequestId = options.awsRequestId ?? randomUUID();
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: options.functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${options.functionName}`,
    memoryLimitInMB: String(options.memoryLimitInMB ?? 1024),
    awsRequestId,
    logGroupName: `/aws/lambda/${options.functionName}`,
    logStreamName: `local/[$LATEST]${awsRequestId.replace(/-/g, '')}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    // The deprecated callback-style completions are not supported by streaming handlers.
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

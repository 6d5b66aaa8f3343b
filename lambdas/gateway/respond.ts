/**
 * Writing to the client: SPEC's error envelope (the one place a refusal goes out, whether decided
 * before admission or after), the headers of a successful reply, and a write that survives a
 * client that has gone.
 */
import { renderError } from '../core/errors';
import type { RequestContext, ResponseSink } from './ports';
import type { Candidate } from './resolve';

/** The headers every response carries (SPEC: on every response). */
export function requestIdHeaders(requestId: string): Record<string, string> {
  return { 'x-sluice-request-id': requestId, 'x-request-id': requestId };
}

/** Renders `err` and writes it as the whole response; returns the status and code it sent. */
export async function writeErrorResponse(sink: ResponseSink, requestId: string, err: unknown): Promise<{ status: number; code: string | null }> {
  const rendered = renderError(err, requestId);
  sink.start(rendered.status, { 'content-type': 'application/json', ...requestIdHeaders(requestId), ...rendered.headers });
  await sink.write(Buffer.from(JSON.stringify(rendered.body)));
  await sink.end();
  return { status: rendered.status, code: rendered.body.error.code };
}

/** The headers of a successful reply (SPEC's `x-sluice-*` set). */
export function successHeaders(ctx: RequestContext, candidate: Candidate, attempts: number, contentType: string): Record<string, string> {
  return {
    'content-type': contentType,
    ...requestIdHeaders(ctx.requestId),
    'x-sluice-served-by': candidate.model.id,
    'x-sluice-provider': candidate.provider.name,
    'x-sluice-retry-attempt-count': String(attempts - 1),
    'x-sluice-cache-status': 'none',
    'x-sluice-trace-id': ctx.traceId,
  };
}

/** Writes to the client; false once the client has gone (settlement goes on regardless). */
export async function tryWrite(sink: ResponseSink, chunk: Buffer): Promise<boolean> {
  try {
    await sink.write(chunk);
    return true;
  } catch {
    return false;
  }
}

/**
 * Writing SPEC's error envelope to a response: the one place a refusal goes out, whether it is
 * decided before admission (app.ts) or after (forward.ts).
 */
import { renderError } from '../core/errors';
import type { ResponseSink } from './ports';

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

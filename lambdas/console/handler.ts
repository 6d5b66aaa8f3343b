/**
 * The console's Lambda handler, behind its own Function URL (buffered, `AuthType: NONE`: the
 * console signs people in itself, with passkeys and session cookies). A `@middy/core` handler
 * like every function's; thin: decode the event, serve, write the answer back.
 */
import { randomBytes } from 'node:crypto';
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { loadConfig } from '../shared/config';
import { handleConsole, type ConsoleRequest } from './app';
import { loadConsoleConfig } from './env';
import type { ConsoleDeps } from './ports';
import { makeConsoleDeps } from './wiring';

let deps: ConsoleDeps | undefined;

/** Decodes a Function URL event into a {@link ConsoleRequest}. */
export function eventToConsoleRequest(event: APIGatewayProxyEventV2, requestId: string): ConsoleRequest {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.headers ?? {})) if (v !== undefined) headers[k.toLowerCase()] = v;
  const body = event.body === undefined ? undefined : event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body;
  return {
    method: event.requestContext.http.method,
    path: event.rawPath,
    query: event.queryStringParameters ?? {},
    headers,
    cookies: event.cookies ?? [],
    body,
    requestId,
  };
}

async function serve(event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> {
  const requestId = `req_${randomBytes(12).toString('hex')}`;
  // The Function URL's host is the same on every request, so the first one settles the origin
  // when the deploy named none (SLUICE_CONSOLE_ORIGIN_FROM=function-url).
  deps ??= makeConsoleDeps(loadConfig(), loadConsoleConfig(process.env, event.requestContext.domainName));
  const res = await handleConsole(eventToConsoleRequest(event, requestId), deps);
  return { statusCode: res.status, headers: { ...res.headers }, ...(res.cookies === undefined ? {} : { cookies: [...res.cookies] }), body: res.body };
}

/** The Lambda entry point. */
export const handler = middy(serve) as unknown as (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

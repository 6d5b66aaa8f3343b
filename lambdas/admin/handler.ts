/**
 * The management API's Lambda handler, behind a Function URL with `AuthType: AWS_IAM`: AWS
 * checks the caller's SigV4 signature and IAM permission before the function runs, and hands
 * over the caller's principal, which every change records as its author. A request without a
 * principal is refused (fail closed): it can only mean the URL's auth was changed.
 */
import type { APIGatewayProxyEventV2WithIAMAuthorizer, APIGatewayProxyResultV2 } from 'aws-lambda';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../shared/config';
import { handleAdmin, type AdminDeps, type AdminRequest } from './app';
import { adminErrorBody } from './refusals';
import { makeAdminDeps } from './wiring';

let deps: AdminDeps | undefined;

/** A fresh request id, in the gateway's `req_` form. */
function newRequestId(): string {
  return `req_${randomBytes(12).toString('hex')}`;
}

/** Decodes a Function URL event into an {@link AdminRequest}; undefined when no principal came with it. */
export function eventToAdminRequest(event: APIGatewayProxyEventV2WithIAMAuthorizer, requestId: string): AdminRequest | undefined {
  const principal = event.requestContext.authorizer?.iam?.userArn;
  if (typeof principal !== 'string' || principal === '') return undefined;
  const body = event.body === undefined ? undefined : event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body;
  return {
    method: event.requestContext.http.method,
    path: event.rawPath,
    query: event.queryStringParameters ?? {},
    body,
    principal,
    requestId,
  };
}

/** The Lambda entry point. */
export async function handler(event: APIGatewayProxyEventV2WithIAMAuthorizer): Promise<APIGatewayProxyResultV2> {
  const requestId = newRequestId();
  const req = eventToAdminRequest(event, requestId);
  if (req === undefined) {
    return {
      statusCode: 401,
      headers: { 'content-type': 'application/json', 'x-sluice-request-id': requestId, 'x-request-id': requestId },
      body: adminErrorBody({ message: 'The management API needs a SigV4-signed request from an IAM principal.', type: 'authentication_error', code: 'unauthenticated', requestId }),
    };
  }
  deps ??= makeAdminDeps(loadConfig());
  const res = await handleAdmin(req, deps);
  return { statusCode: res.status, headers: { ...res.headers }, body: res.body };
}

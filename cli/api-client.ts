/**
 * The CLI's only way to change Sluice: HTTP calls to the management API. Deployed stages are
 * signed with SigV4 (service `lambda`, the Function URL's IAM auth) using the AWS SDK's default
 * credential chain; the local stage sends the admin token `npm start` keeps in
 * `.sluice/admin-token`. The CLI holds no DynamoDB client and writes no table.
 */
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { ADMIN_BASE_PATH, CONFIGURATION_HOME_HEADER } from '../lambdas/admin/paths';

/** A refusal or failure answered by the management API (or on the way to it). */
export class AdminApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    readonly requestId: string | null,
    /** With `configuration_home_elsewhere`: the configuration home the refusing region named. */
    readonly configurationHome?: string,
  ) {
    super(message);
    this.name = 'AdminApiError';
  }
}

/** One call: method, path under `/admin/v1`, optional query and JSON body. */
export interface AdminCall {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly path: string;
  readonly query?: Readonly<Record<string, string | undefined>>;
  readonly body?: unknown;
}

/** The management API, as the commands see it. */
export interface AdminApi {
  call<T = Record<string, unknown>>(req: AdminCall): Promise<T>;
}

/** Builds a path from segments, each URL-encoded (a key's visible part holds `…`). */
export function apiPath(...parts: readonly string[]): string {
  return `/${parts.map((p) => encodeURIComponent(p)).join('/')}`;
}

/** How a request is authorised before it is sent. */
type Authorise = (request: { method: string; url: URL; headers: Record<string, string>; body: string | undefined }) => Promise<Record<string, string>>;

/** SHA-256 for the signer, from node:crypto (one less dependency than the SDK's hashers). */
class NodeSha256 {
  private readonly hash: Hash | Hmac;
  constructor(secret?: string | Uint8Array | ArrayBuffer | ArrayBufferView) {
    this.hash =
      secret === undefined
        ? createHash('sha256')
        : createHmac('sha256', typeof secret === 'string' ? secret : Buffer.from(secret instanceof ArrayBuffer ? new Uint8Array(secret) : (secret as Uint8Array)));
  }
  update(data: string | Uint8Array | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(typeof data === 'string' ? data : Buffer.from(data instanceof ArrayBuffer ? new Uint8Array(data) : (data as Uint8Array)));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.hash.digest()));
  }
  reset(): void {
    throw new Error('not supported');
  }
}

/** A client over HTTP with some authorisation. */
class HttpAdminApi implements AdminApi {
  constructor(
    private readonly baseUrl: string,
    private readonly authorise: Authorise,
    private readonly fetchImpl: typeof fetch = fetch,
  ) {}

  async call<T>(req: AdminCall): Promise<T> {
    const url = new URL(`${this.baseUrl.replace(/\/+$/, '')}${ADMIN_BASE_PATH}${req.path}`);
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const body = req.body === undefined ? undefined : JSON.stringify(req.body);
    const headers: Record<string, string> = { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) };
    const signed = await this.authorise({ method: req.method, url, headers, body });
    let res: Response;
    try {
      res = await this.fetchImpl(url, { method: req.method, headers: signed, ...(body === undefined ? {} : { body }) });
    } catch (err) {
      throw new AdminApiError('unreachable', `cannot reach the management API at ${url.origin}: ${(err as Error).message}`, 0, null);
    }
    const text = await res.text();
    const requestId = res.headers.get('x-sluice-request-id');
    let parsed: unknown;
    try {
      parsed = text === '' ? {} : JSON.parse(text);
    } catch {
      throw new AdminApiError('bad_response', `the management API answered ${res.status} with a body that is not JSON`, res.status, requestId);
    }
    if (!res.ok) {
      const e = (parsed as { error?: { code?: unknown; message?: unknown } } | { Message?: unknown }) ?? {};
      if ('error' in e && e.error !== undefined) {
        const home = res.headers.get(CONFIGURATION_HOME_HEADER) ?? undefined;
        throw new AdminApiError(typeof e.error.code === 'string' ? e.error.code : 'failed', String(e.error.message ?? res.statusText), res.status, requestId, home);
      }
      // An answer from AWS itself (a refused signature or permission) rather than from Sluice.
      const message = 'Message' in e && typeof e.Message === 'string' ? e.Message : res.statusText;
      throw new AdminApiError(res.status === 403 ? 'forbidden' : 'failed', `${res.status}: ${message}`, res.status, requestId);
    }
    return parsed as T;
  }
}

/** The local stage: the admin token as a Bearer token. */
export function localAdminApi(baseUrl: string, token: string, fetchImpl?: typeof fetch): AdminApi {
  return new HttpAdminApi(baseUrl, async (r) => ({ ...r.headers, authorization: `Bearer ${token}` }), fetchImpl);
}

/** A deployed stage: SigV4 for service `lambda` with the default AWS credential chain. */
export function signedAdminApi(baseUrl: string, region: string, fetchImpl?: typeof fetch): AdminApi {
  const signer = new SignatureV4({ service: 'lambda', region, credentials: defaultProvider(), sha256: NodeSha256 });
  return new HttpAdminApi(
    baseUrl,
    async (r) => {
      const query: Record<string, string> = {};
      for (const [k, v] of r.url.searchParams) query[k] = v;
      const signed = await signer.sign({
        method: r.method,
        protocol: r.url.protocol,
        hostname: r.url.hostname,
        ...(r.url.port === '' ? {} : { port: Number(r.url.port) }),
        path: r.url.pathname,
        query,
        headers: { ...r.headers, host: r.url.host },
        ...(r.body === undefined ? {} : { body: r.body }),
      });
      return signed.headers;
    },
    fetchImpl,
  );
}

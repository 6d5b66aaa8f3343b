/**
 * SigV4 for DynamoDB's one shape of request: `POST /`, no query, a JSON body, and always the same
 * five or six headers. The AWS SDK's signer (`@smithy/signature-v4`) handles every service and
 * every shape, and pays for it on each call: it clones the request, sorts and folds every header,
 * escapes the path, awaits four hashes (one HMAC only to name its key cache) and hex-encodes
 * them in JavaScript. Measured in process, it cost 42–46 µs per TransactWriteItems, about as much
 * as marshalling the whole transaction; this signer computes the same signature with four
 * one-shot SHA-256 hashes (the payload, the canonical request, and the HMAC's two) and no promise
 * (see docs/gateway.md). The signing key is derived once per day, region, service and secret, and
 * reused as HMAC's padded blocks: it only changes with the date or the role's session.
 *
 * Every signature is tested equal to the SDK signer's (`test/unit/dynamo-wire.test.ts`, and a
 * property test over random bodies, dates, hosts and credentials in `test/unit/sigv4.test.ts`).
 */
import { createHmac, hash } from 'node:crypto';
import { memoized } from '../shared/memo';

/** AWS credentials as the SDK's providers give them. */
export interface SigningCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

const ALGORITHM = 'AWS4-HMAC-SHA256';
/** The headers signed, in canonical (sorted) order; `x-amz-security-token` sits between date and target when sent. */
const SIGNED_WITHOUT_TOKEN = 'content-type;host;x-amz-content-sha256;x-amz-date;x-amz-target';
const SIGNED_WITH_TOKEN = 'content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token;x-amz-target';

/** The last second `amzDate` spelled: every call within one second signs with the same date. */
let lastAmzDate = { second: Number.NaN, value: '' };

/** `20261122T123456Z` for a time: ISO 8601 basic format, whole seconds, UTC. */
export function amzDate(at: Date): string {
  const second = Math.floor(at.getTime() / 1000);
  if (second === lastAmzDate.second) return lastAmzDate.value;
  const iso = at.toISOString(); // 2026-11-22T12:34:56.789Z
  const value = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
  lastAmzDate = { second, value };
  return value;
}

/**
 * A header value as SigV4 canonicalises it: line breaks become spaces, runs of spaces and tabs
 * one space, no space at either end (what the SDK's signer does to every header). The values
 * signed here never need it except a host or a session token read from outside, so the common
 * case is a test, not a copy.
 */
export function canonicalValue(value: string): string {
  if (!/[\r\n\t]| {2}|^ | $/.test(value)) return value;
  return value
    .replace(/[\r\n]/g, ' ')
    .replace(/[ \t]+/g, ' ')
    .replace(/^ | $/g, '');
}

/** An HMAC-SHA256 key as its two padded blocks (RFC 2104): the key XOR 0x36 and XOR 0x5c, 64 bytes each. */
interface HmacKey {
  readonly inner: Buffer;
  readonly outer: Buffer;
}

/** The padded blocks of a key of at most 64 bytes (a signing key is 32: an HMAC-SHA256's output). */
function hmacKey(key: Buffer): HmacKey {
  const inner = Buffer.alloc(64, 0x36);
  const outer = Buffer.alloc(64, 0x5c);
  for (let i = 0; i < key.length; i += 1) {
    inner[i] = 0x36 ^ (key[i] as number);
    outer[i] = 0x5c ^ (key[i] as number);
  }
  return { inner, outer };
}

/**
 * HMAC-SHA256 of `data` (UTF-8) under `key`, hex: SHA-256(outer ‖ SHA-256(inner ‖ data)), by
 * two one-shot hashes. `createHmac` costs an HMAC context per call, whose set-up (OpenSSL
 * fetching the digest and hashing the key's blocks again) measured 30 µs a signature in the
 * gateway's process, more than the rest of the signature; this measured 7 µs for the same bytes.
 */
function hmacHex(key: HmacKey, data: string): string {
  const inner = hash('sha256', Buffer.concat([key.inner, Buffer.from(data, 'utf8')]), 'buffer');
  return hash('sha256', Buffer.concat([key.outer, inner]), 'hex');
}

/** Signs DynamoDB's JSON-protocol requests for one endpoint and region. */
export class DynamoSigner {
  private key: { readonly day: string; readonly secret: string; readonly value: HmacKey } | undefined;
  private readonly canonicalHost: string;
  /** A target as signed: DynamoWire sends a handful, each canonicalised once. */
  private readonly canonicalTarget = memoized(canonicalValue, 64);

  constructor(
    private readonly region: string,
    private readonly host: string,
    private readonly service = 'dynamodb',
    private readonly contentType = 'application/x-amz-json-1.0',
  ) {
    this.canonicalHost = canonicalValue(host);
  }

  /**
   * The headers to send for this body at this time: `content-type`, `host`, `x-amz-target`,
   * `x-amz-date`, `x-amz-security-token` (with a session), `x-amz-content-sha256` and
   * `authorization`, as the SDK's signer returns them.
   */
  sign(target: string, body: Buffer | string, credentials: SigningCredentials, at: Date): Record<string, string> {
    const date = amzDate(at);
    const day = date.slice(0, 8);
    const scope = `${day}/${this.region}/${this.service}/aws4_request`;
    const payloadHash = hash('sha256', body, 'hex');
    const token = credentials.sessionToken;
    // An empty token is no token: the SDK's signer leaves the header out for any falsy one.
    const withToken = token !== undefined && token !== '';
    const signedHeaders = withToken ? SIGNED_WITH_TOKEN : SIGNED_WITHOUT_TOKEN;
    const canonicalTarget = this.canonicalTarget(target);
    const canonicalRequest =
      `POST\n/\n\ncontent-type:${this.contentType}\nhost:${this.canonicalHost}\nx-amz-content-sha256:${payloadHash}\nx-amz-date:${date}\n` +
      (withToken ? `x-amz-security-token:${canonicalValue(token)}\n` : '') +
      `x-amz-target:${canonicalTarget}\n\n${signedHeaders}\n${payloadHash}`;
    const stringToSign = `${ALGORITHM}\n${date}\n${scope}\n${hash('sha256', canonicalRequest, 'hex')}`;
    const signature = hmacHex(this.signingKey(day, credentials.secretAccessKey), stringToSign);
    const headers: Record<string, string> = {
      'content-type': this.contentType,
      host: this.host,
      'x-amz-target': target,
      'x-amz-date': date,
    };
    if (withToken) headers['x-amz-security-token'] = token;
    headers['x-amz-content-sha256'] = payloadHash;
    headers.authorization = `${ALGORITHM} Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
    return headers;
  }

  /** The day's signing key, derived once per day and secret (four HMACs) and kept, as HMAC's two padded blocks. */
  private signingKey(day: string, secret: string): HmacKey {
    const known = this.key;
    if (known !== undefined && known.day === day && known.secret === secret) return known.value;
    const hmac = (key: string | Buffer, data: string): Buffer => createHmac('sha256', key).update(data).digest();
    const value = hmacKey(hmac(hmac(hmac(hmac(`AWS4${secret}`, day), this.region), this.service), 'aws4_request'));
    this.key = { day, secret, value };
    return value;
  }
}

/**
 * node:crypto's SHA-256 and HMAC behind the hash interface the AWS SDK's SigV4 signer
 * (`@smithy/signature-v4`) takes, so tests can run that signer as the reference for DynamoWire's.
 */
import { createHash, createHmac } from 'node:crypto';

type SourceData = string | ArrayBuffer | ArrayBufferView;

const bytes = (data: SourceData): string | Buffer =>
  typeof data === 'string' ? data : data instanceof ArrayBuffer ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);

/** A `Checksum` for the SDK's signer over node:crypto. */
export class NodeSha256 {
  private hash;
  constructor(private readonly secret?: SourceData) {
    this.hash = this.fresh();
  }
  private fresh(): ReturnType<typeof createHash> | ReturnType<typeof createHmac> {
    return this.secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(this.secret));
  }
  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.hash.digest()));
  }
  reset(): void {
    this.hash = this.fresh();
  }
}

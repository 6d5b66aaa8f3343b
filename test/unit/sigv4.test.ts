/**
 * DynamoWire's SigV4 (`lambdas/adapters/sigv4.ts`) against the AWS SDK's own signer,
 * `@smithy/signature-v4`, configured as the SDK configures it for DynamoDB: every header it returns
 * equal, over generated bodies, times, regions, hosts, targets and credentials, with one signer
 * reused throughout so its cached signing key is exercised across days and secrets.
 */
import fc from 'fast-check';
import { SignatureV4 } from '@smithy/signature-v4';
import { NodeSha256 } from '../support/node-sha256';
import { DynamoSigner, amzDate, canonicalValue } from '../../lambdas/adapters/sigv4';

const CONTENT_TYPE = 'application/x-amz-json-1.0';

async function sdkHeaders(region: string, host: string, target: string, body: string, credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string }, at: Date): Promise<Record<string, string>> {
  const signer = new SignatureV4({ service: 'dynamodb', region, credentials, sha256: NodeSha256 });
  const signed = await signer.sign({ method: 'POST', protocol: 'https:', hostname: host, path: '/', query: {}, headers: { 'content-type': CONTENT_TYPE, host, 'x-amz-target': target }, body }, { signingDate: at });
  return signed.headers;
}

describe('DynamoSigner', () => {
  it('returns the headers the SDK signer returns, for any body, time, region, host, target and credentials', async () => {
    const signers = new Map<string, DynamoSigner>();
    const secret = fc.oneof(fc.constantFrom('wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', 'S', 'secret/with+chars='), fc.string({ minLength: 1, maxLength: 40 }));
    const token = fc.oneof(fc.constant(undefined), fc.constant(''), fc.base64String({ minLength: 4, maxLength: 400 }), fc.constantFrom(' padded token ', 'two  spaces', 'tab\there'));
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: 'grapheme', maxLength: 300 }),
        fc.date({ min: new Date(Date.UTC(2000, 0, 1)), max: new Date(Date.UTC(2099, 11, 31)), noInvalidDate: true }),
        fc.constantFrom('eu-west-1', 'us-east-1', 'ap-southeast-2', 'local'),
        fc.constantFrom('dynamodb.eu-west-1.amazonaws.com', '127.0.0.1:8000', 'localhost:45123'),
        fc.constantFrom('DynamoDB_20120810.TransactWriteItems', 'DynamoDB_20120810.UpdateItem', 'DynamoDB_20120810.GetItem'),
        fc.record({ accessKeyId: fc.constantFrom('AKIDEXAMPLE', 'ASIAEXAMPLE', 'local'), secretAccessKey: secret, sessionToken: token }, { requiredKeys: ['accessKeyId', 'secretAccessKey'] }),
        async (body, at, region, host, target, credentials) => {
          // One signer per endpoint, as DynamoWire keeps: its cached key meets every day and secret.
          const id = `${region}|${host}`;
          let signer = signers.get(id);
          if (signer === undefined) signers.set(id, (signer = new DynamoSigner(region, host)));
          const ours = signer.sign(target, Buffer.from(body, 'utf8'), credentials, at);
          expect(ours).toEqual(await sdkHeaders(region, host, target, body, credentials, at));
        },
      ),
      { numRuns: 400 },
    );
  });

  it('derives a new signing key on a new day and for a new secret, and reuses it otherwise', () => {
    const signer = new DynamoSigner('eu-west-1', 'dynamodb.eu-west-1.amazonaws.com');
    const creds = { accessKeyId: 'AKID', secretAccessKey: 'S1' };
    const at = new Date(Date.UTC(2026, 10, 22, 23, 59, 59));
    const sign = (c: typeof creds, when: Date): string => signer.sign('T', Buffer.from('{}'), c, when).authorization as string;
    const fresh = (c: typeof creds, when: Date): string => new DynamoSigner('eu-west-1', 'dynamodb.eu-west-1.amazonaws.com').sign('T', Buffer.from('{}'), c, when).authorization as string;
    expect(sign(creds, at)).toBe(fresh(creds, at));
    const nextDay = new Date(at.getTime() + 1_000);
    expect(sign(creds, nextDay)).toBe(fresh(creds, nextDay));
    expect(sign({ ...creds, secretAccessKey: 'S2' }, nextDay)).toBe(fresh({ ...creds, secretAccessKey: 'S2' }, nextDay));
    expect(sign(creds, nextDay)).toBe(fresh(creds, nextDay));
    expect(sign(creds, nextDay)).not.toBe(sign({ ...creds, secretAccessKey: 'S2' }, nextDay));
  });

  it('formats the signing time as SigV4 wants it', () => {
    expect(amzDate(new Date(Date.UTC(2026, 10, 22, 12, 34, 56, 789)))).toBe('20261122T123456Z');
    expect(amzDate(new Date(Date.UTC(2027, 0, 1, 0, 0, 0, 0)))).toBe('20270101T000000Z');
  });

  it('spells each time anew when the second changes, whatever the order (it keeps the last second it spelled)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2099, 11, 31) }), { minLength: 1, maxLength: 30 }), (times) => {
        for (const at of times) {
          const iso = new Date(at).toISOString();
          const expected = `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}T${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}Z`;
          expect(amzDate(new Date(at))).toBe(expected);
          expect(amzDate(new Date(at - (at % 1000) + 999))).toBe(expected);
          expect(amzDate(new Date(at - (at % 1000) + 1000))).not.toBe(expected);
        }
      }),
      { numRuns: 300 },
    );
  });

  it.each([
    ['plain', 'plain'],
    [' lead and trail ', 'lead and trail'],
    ['a  b\t\tc', 'a b c'],
    ['line\r\nbreak', 'line break'],
  ])('canonicalises the header value %j as %j', (value, canonical) => {
    expect(canonicalValue(value)).toBe(canonical);
  });
});

/**
 * The self-signed certificate for `localhost` the TLS tests serve with (`test/fixtures/tls`): a
 * client trusts it only when given it as its `ca`.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

const FIXTURES = path.join(__dirname, '../fixtures/tls');

export const localhostTls = {
  cert: readFileSync(path.join(FIXTURES, 'localhost-cert.pem')),
  key: readFileSync(path.join(FIXTURES, 'localhost-key.pem')),
} as const;

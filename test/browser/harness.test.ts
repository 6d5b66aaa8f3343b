/**
 * The browser harness itself (test/support/browser.ts): Debian's Chromium starts headless under
 * playwright-core, a virtual authenticator lets a page on `http://localhost:<port>` create a passkey
 * and sign in with it, screenshots are PNG files, and the browser ends whatever the test does.
 * If this file passes, the CI can run the console's passkey tests.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  addVirtualAuthenticator,
  BrowserUnavailableError,
  CHROMIUM_PATH_ENV,
  chromiumPath,
  closeAllBrowsers,
  launchBrowser,
  screenshot,
  withBrowser,
  type BrowserHarness,
} from '../support/browser';

// Browser start-up on a loaded 2-core machine takes seconds, not milliseconds.
jest.setTimeout(90_000);

/** What the page reports after `navigator.credentials.create()` then `.get()`. */
interface PasskeyResult {
  readonly created: { readonly id: string; readonly type: string; readonly attachment: string | null; readonly attestationBytes: number };
  readonly asserted: { readonly id: string; readonly userHandle: string; readonly signatureBytes: number };
}

// A relying party in thirty lines: register a discoverable passkey, then sign in with it without
// naming the user (the console's flow). Fixed challenges are fine here: no server verifies them.
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>Passkey probe</title></head>
<body><h1>Passkey probe</h1><p id="state">ready</p>
<script>
window.probe = async () => {
  const created = await navigator.credentials.create({ publicKey: {
    challenge: crypto.getRandomValues(new Uint8Array(32)),
    rp: { name: 'Sluice test', id: 'localhost' },
    user: { id: new TextEncoder().encode('user-1'), name: 'owner@example.com', displayName: 'Owner' },
    pubKeyCredParams: [{ type: 'public-key', alg: -7 }, { type: 'public-key', alg: -257 }],
    authenticatorSelection: { residentKey: 'required', userVerification: 'required', authenticatorAttachment: 'platform' },
    timeout: 10000,
  } });
  const asserted = await navigator.credentials.get({ publicKey: {
    challenge: crypto.getRandomValues(new Uint8Array(32)),
    rpId: 'localhost',
    userVerification: 'required',
    timeout: 10000,
  } });
  document.getElementById('state').textContent = 'signed in';
  return {
    created: { id: created.id, type: created.type, attachment: created.authenticatorAttachment,
      attestationBytes: created.response.attestationObject.byteLength },
    asserted: { id: asserted.id, userHandle: new TextDecoder().decode(asserted.response.userHandle),
      signatureBytes: asserted.response.signature.byteLength },
  };
};
</script></body></html>`;

let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer((req, res) => {
    res.writeHead(req.url === '/' ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
    res.end(req.url === '/' ? PAGE : 'not found');
  });
  // Port 0: the kernel picks a free port, so parallel runs on one machine never collide.
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await closeAllBrowsers();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('browser harness', () => {
  it('creates a passkey and signs in with it through a virtual authenticator', async () => {
    await withBrowser(async (harness) => {
      const page = await harness.newPage();
      const authenticator = await addVirtualAuthenticator(page);
      expect(await authenticator.credentials()).toEqual([]);
      await page.goto(`http://localhost:${port}/`);

      const result = (await page.evaluate('window.probe()')) as PasskeyResult;
      expect(result.created.type).toBe('public-key');
      expect(result.created.id).toMatch(/^[A-Za-z0-9_-]{16,}$/);
      expect(result.created.attachment).toBe('platform');
      expect(result.created.attestationBytes).toBeGreaterThan(0);
      // Signed in with the same discoverable credential, which carries the user's handle.
      expect(result.asserted.id).toBe(result.created.id);
      expect(result.asserted.userHandle).toBe('user-1');
      expect(result.asserted.signatureBytes).toBeGreaterThan(0);
      expect(await page.textContent('#state')).toBe('signed in');

      const held = await authenticator.credentials();
      expect(held).toHaveLength(1);
      expect(held[0]?.rpId).toBe('localhost');
      expect(held[0]?.isResidentCredential).toBe(true);
      expect(held[0]?.signCount).toBeGreaterThan(0);
      expect(Buffer.from(held[0]?.credentialId ?? '', 'base64').toString('base64url')).toBe(result.created.id);
    });
  });

  it('refuses a passkey when the authenticator cannot verify its user', async () => {
    await withBrowser(async (harness) => {
      const page = await harness.newPage();
      const authenticator = await addVirtualAuthenticator(page, { isUserVerified: false });
      await page.goto(`http://localhost:${port}/`);
      // The page requires user verification (as the console does); a failed fingerprint is a refusal.
      const outcome = await page.evaluate('window.probe().then(() => "created", (e) => e.name)');
      expect(outcome).toBe('NotAllowedError');
      expect(await authenticator.credentials()).toEqual([]);
    });
  });

  it('gives each page its own cookies and can grant the clipboard', async () => {
    await withBrowser(async (harness) => {
      const a = await harness.newPage({ clipboard: true, baseURL: `http://localhost:${port}` });
      const b = await harness.newPage();
      await a.goto('/');
      await b.goto(`http://localhost:${port}/`);
      await a.evaluate('document.cookie = "session=a"');
      expect(await b.evaluate('document.cookie')).toBe('');
      await a.evaluate('navigator.clipboard.writeText("slc_copied")');
      expect(await a.evaluate('navigator.clipboard.readText()')).toBe('slc_copied');
    });
  });

  it('writes a full-page PNG under a kebab-case name, and refuses any other name', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sluice-screens-'));
    try {
      await withBrowser(async (harness) => {
        const page = await harness.newPage();
        await page.goto(`http://localhost:${port}/`);
        const file = await screenshot(page, 'passkey-probe', dir);
        expect(file).toBe(path.join(dir, 'passkey-probe.png'));
        const png = await readFile(file);
        expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
        // Width from the IHDR chunk: the harness's 1280-pixel viewport.
        expect(png.readUInt32BE(16)).toBe(1280);
        for (const bad of ['../escape', 'Keys', 'a/b', 'keys.png', '']) {
          await expect(screenshot(page, bad, dir)).rejects.toThrow(/kebab-case/);
        }
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('closes the browser when the test body throws, and close is idempotent', async () => {
    let seen: BrowserHarness | undefined;
    await expect(
      withBrowser(async (harness) => {
        seen = harness;
        await harness.newPage();
        throw new Error('test body failed');
      }),
    ).rejects.toThrow('test body failed');
    expect(seen?.browser.isConnected()).toBe(false);

    const harness = await launchBrowser();
    expect(harness.browser.isConnected()).toBe(true);
    await harness.close();
    await harness.close();
    expect(harness.browser.isConnected()).toBe(false);
  });

  it('says how to install Chromium when it is missing', () => {
    const env = { [CHROMIUM_PATH_ENV]: '/nonexistent/chromium' };
    expect(() => chromiumPath(env)).toThrow(BrowserUnavailableError);
    expect(() => chromiumPath(env)).toThrow(/apt-get install -y chromium/);
  });
});

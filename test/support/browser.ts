/**
 * The browser harness of the console's end-to-end tests: Debian's `chromium` driven by
 * `playwright-core` over CDP, headless, a virtual WebAuthn authenticator per page (passkeys
 * without a person), screenshots (the ones `docs/` shows when asked to), and cleanup that cannot be forgotten.
 *
 * `playwright-core` never downloads a browser (unlike the `playwright` package, it has no install
 * step); the executable is the system's, installed by `.ci/run` when missing
 * (`apt-get install chromium`). `SLUICE_CHROMIUM_PATH` points the harness at another one.
 *
 * Usage:
 *
 * ```ts
 * await withBrowser(async (harness) => {
 *   const page = await harness.newPage();
 *   const authenticator = await addVirtualAuthenticator(page);
 *   await page.goto(`http://localhost:${port}/`);   // localhost: a secure context, so WebAuthn works
 *   ...
 *   await screenshot(page, 'console-keys');
 * });
 * ```
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import * as path from 'node:path';
import * as os from 'node:os';
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type CDPSession, type Locator, type Page } from 'playwright-core';

/** Environment variable naming another Chromium executable than Debian's. */
export const CHROMIUM_PATH_ENV = 'SLUICE_CHROMIUM_PATH';

/** Where Debian's `chromium` package puts its launcher. */
export const DEBIAN_CHROMIUM = '/usr/bin/chromium';

/** The repository's `docs/screenshots/`, which the README and `docs/console.md` show. */
export const DOCS_SCREENSHOT_DIR = path.resolve(__dirname, '..', '..', 'docs', 'screenshots');

/**
 * Where {@link screenshot} writes by default. A plain `npm test` writes into the temporary
 * directory, so a test run leaves the checkout clean (each picture holds fresh ids and times);
 * `SLUICE_UPDATE_SCREENSHOTS=1 npm test` writes the pictures the docs show.
 */
export const SCREENSHOT_DIR =
  process.env.SLUICE_UPDATE_SCREENSHOTS === '1' ? DOCS_SCREENSHOT_DIR : path.join(os.tmpdir(), 'sluice-screenshots');

/**
 * Chromium's flags for tests. `--no-sandbox`: CI runs as root, where Chromium refuses to start
 * sandboxed. The rest keep a test run from reaching the network or leaving state behind.
 */
export const CHROMIUM_ARGS: readonly string[] = [
  '--no-sandbox',
  // No component updates, safe-browsing lists, metrics or field trials: the CI has no internet
  // and a test must not wait on it.
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--metrics-recording-only',
  '--no-first-run',
  '--no-default-browser-check',
  // Containers give /dev/shm 64 MB, which Chromium's renderers outgrow; /tmp instead.
  '--disable-dev-shm-usage',
];

/** Chromium is not installed where the harness looks; the message says how to install it. */
export class BrowserUnavailableError extends Error {
  override readonly name = 'BrowserUnavailableError';
}

/** The executable the harness launches: `$SLUICE_CHROMIUM_PATH`, else Debian's `/usr/bin/chromium`. */
export function chromiumPath(env: NodeJS.ProcessEnv = process.env): string {
  const override = env[CHROMIUM_PATH_ENV];
  const executable = override !== undefined && override !== '' ? override : DEBIAN_CHROMIUM;
  if (!existsSync(executable)) {
    throw new BrowserUnavailableError(
      `No Chromium at ${executable}. The browser tests drive Debian's chromium: ` +
        '`apt-get install -y chromium` (`.ci/run` does it when missing), ' +
        `or set ${CHROMIUM_PATH_ENV} to a Chromium or Chrome executable.`,
    );
  }
  return executable;
}

/** Options of {@link BrowserHarness.newPage}. */
export interface NewPageOptions {
  /**
   * Lets the page read and write the clipboard without a prompt, for "copy" buttons
   * (`navigator.clipboard`), and read it back with `page.evaluate(() => navigator.clipboard.readText())`.
   * @default false
   */
  readonly clipboard?: boolean;
  /**
   * Base URL for `page.goto('/path')`.
   * @default none
   */
  readonly baseURL?: string;
}

/** A launched Chromium and what was opened in it; {@link BrowserHarness.close} ends all of it. */
export interface BrowserHarness {
  /** The browser; prefer {@link BrowserHarness.newPage}, which is closed with the harness. */
  readonly browser: Browser;
  /** A page in a fresh context: its own cookies and storage, so each page is one signed-in person. */
  newPage(options?: NewPageOptions): Promise<Page>;
  /** Closes every context and the browser (its process ends); safe to call twice. */
  close(): Promise<void>;
}

// Every harness not yet closed, so a test file's `afterAll(closeAllBrowsers)` catches the ones
// a failing test left behind.
const open = new Set<BrowserHarness>();

/**
 * Launches Chromium headless with {@link CHROMIUM_ARGS}. Playwright owns the process: it is started
 * in its own process group and killed by its PID on `close()`, on the worker's exit or on a
 * signal, so no Chromium outlives the test run.
 */
export async function launchBrowser(env: NodeJS.ProcessEnv = process.env): Promise<BrowserHarness> {
  const browser = await chromium.launch({
    executablePath: chromiumPath(env),
    headless: true,
    args: [...CHROMIUM_ARGS],
    // Playwright's own defaults, said out loud: these are what end the browser if jest is interrupted.
    handleSIGINT: true,
    handleSIGTERM: true,
    handleSIGHUP: true,
    timeout: 60_000,
  });
  const contexts: BrowserContext[] = [];
  let closing: Promise<void> | undefined;
  const harness: BrowserHarness = {
    browser,
    async newPage(options: NewPageOptions = {}): Promise<Page> {
      const contextOptions: BrowserContextOptions = {
        viewport: { width: 1280, height: 800 },
        ...(options.baseURL !== undefined ? { baseURL: options.baseURL } : {}),
      };
      const context = await browser.newContext(contextOptions);
      contexts.push(context);
      if (options.clipboard === true) await context.grantPermissions(['clipboard-read', 'clipboard-write']);
      return context.newPage();
    },
    close(): Promise<void> {
      closing ??= (async () => {
        open.delete(harness);
        // Contexts first (each may hold a CDP session); a context already gone is fine.
        await Promise.allSettled(contexts.map((c) => c.close()));
        await browser.close();
      })();
      return closing;
    },
  };
  open.add(harness);
  return harness;
}

/** Closes every harness still open; for `afterAll` in a browser test file. */
export async function closeAllBrowsers(): Promise<void> {
  await Promise.allSettled([...open].map((h) => h.close()));
}

/** Runs `fn` with a launched browser and closes it afterwards, whether `fn` succeeds or throws. */
export async function withBrowser<T>(fn: (harness: BrowserHarness) => Promise<T>, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  const harness = await launchBrowser(env);
  try {
    return await fn(harness);
  } finally {
    await harness.close();
  }
}

/** A credential held by a {@link VirtualAuthenticator}, as CDP reports it. */
export interface VirtualCredential {
  /** The credential id, base64 (standard alphabet, as CDP gives it). */
  readonly credentialId: string;
  /** Whether it is a discoverable (resident) credential, usable without typing a user name. */
  readonly isResidentCredential: boolean;
  /** The relying party id it is scoped to, e.g. `localhost`. */
  readonly rpId?: string;
  /** The user handle, base64. */
  readonly userHandle?: string;
  /** The signature counter. */
  readonly signCount: number;
}

/** Options of {@link addVirtualAuthenticator}. */
export interface VirtualAuthenticatorOptions {
  /**
   * Whether the authenticator reports the user verified (a passed fingerprint or PIN).
   * @default true
   */
  readonly isUserVerified?: boolean;
}

/** A virtual platform authenticator attached to one page (and its context's later navigations). */
export interface VirtualAuthenticator {
  /** CDP's id for it. */
  readonly authenticatorId: string;
  /** The credentials it holds now. */
  credentials(): Promise<readonly VirtualCredential[]>;
  /** Detaches it: the page has no authenticator afterwards (a person on another device). */
  remove(): Promise<void>;
}

/**
 * Gives `page` a virtual passkey authenticator through CDP's WebAuthn domain: CTAP2, a platform
 * authenticator (`internal`, like Touch ID or Windows Hello) that holds discoverable credentials,
 * verifies its user and answers at once (`automaticPresenceSimulation`), so
 * `navigator.credentials.create()` and `.get()` complete with no dialog. WebAuthn needs a secure
 * context: serve the page on `http://localhost:<port>`, not `127.0.0.1`, so the RP ID is `localhost`.
 */
export async function addVirtualAuthenticator(page: Page, options: VirtualAuthenticatorOptions = {}): Promise<VirtualAuthenticator> {
  const cdp: CDPSession = await page.context().newCDPSession(page);
  await cdp.send('WebAuthn.enable', { enableUI: false });
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: options.isUserVerified ?? true,
      automaticPresenceSimulation: true,
    },
  });
  return {
    authenticatorId,
    async credentials(): Promise<readonly VirtualCredential[]> {
      const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
      return credentials.map((c) => ({
        credentialId: c.credentialId,
        isResidentCredential: c.isResidentCredential,
        signCount: c.signCount,
        ...(c.rpId !== undefined ? { rpId: c.rpId } : {}),
        ...(c.userHandle !== undefined ? { userHandle: c.userHandle } : {}),
      }));
    },
    async remove(): Promise<void> {
      await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId });
      await cdp.detach();
    },
  };
}

// A screenshot's name is a file name of its own: no directory, no surprise extension.
const SCREENSHOT_NAME = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/** Options of {@link screenshot}. */
export interface ScreenshotOptions {
  /**
   * Parts of the page painted over in the picture, e.g. a raw key in its one-time panel: a
   * picture the docs show never holds a secret, even a test's.
   * @default none
   */
  readonly mask?: readonly Locator[];
}

/**
 * Saves a full-page PNG of `page` as `<dir>/<name>.png` (by default {@link SCREENSHOT_DIR}) and
 * returns its path. `name` is kebab-case, e.g. `console-keys`.
 */
export async function screenshot(page: Page, name: string, dir: string = SCREENSHOT_DIR, options: ScreenshotOptions = {}): Promise<string> {
  if (!SCREENSHOT_NAME.test(name)) throw new Error(`screenshot name must be kebab-case, got ${JSON.stringify(name)}`);
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${name}.png`);
  // No caret or animations: the same page gives the same picture, so a rerun changes no pixel it need not.
  await page.screenshot({
    path: file,
    fullPage: true,
    animations: 'disabled',
    caret: 'hide',
    ...(options.mask === undefined ? {} : { mask: [...options.mask], maskColor: '#9ca3af' }),
  });
  return file;
}

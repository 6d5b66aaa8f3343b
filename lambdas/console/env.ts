/**
 * The console function's configuration beyond the shared one (`lambdas/shared/config.ts`):
 * where it is served from, which decides the WebAuthn relying party. Read and validated once,
 * at cold start, into a frozen object. CDK sets these variables on the function; local mode
 * sets them on its own process.
 */

/** Environment variable names the console reads (besides `ENV` of the shared configuration). */
export const CONSOLE_ENV = {
  /**
   * The console's public origin, e.g. `https://console.example.com` or, locally,
   * `http://localhost:8790`. Passkeys are bound to its host name (the WebAuthn RP ID), and every
   * change must come from it (the Origin check). Required, unless {@link CONSOLE_ENV.originFrom}
   * says where else it comes from: a console with neither refuses to start.
   */
  origin: 'SLUICE_CONSOLE_ORIGIN',
  /**
   * `function-url` (CDK sets it when no domain of one's own fronts the console): the origin is the
   * Function URL's own, `https://<requestContext.domainName>`, a host AWS sets on each request
   * (not the client's `Host` header). The function cannot be given its own URL at deploy: the
   * URL depends on the function, and CloudFormation would see a cycle.
   */
  originFrom: 'SLUICE_CONSOLE_ORIGIN_FROM',
  /** Name shown by the authenticator when a passkey is made. @default 'Sluice' */
  rpName: 'SLUICE_CONSOLE_RP_NAME',
  /** How long a session lasts after sign-in, in minutes. @default 720 (12 hours) */
  sessionMinutes: 'SLUICE_CONSOLE_SESSION_MINUTES',
  /** Folder of the browser bundle (`console.js`, `console.css`); default: `console-assets` beside the handler. */
  assetsDir: 'SLUICE_CONSOLE_ASSETS_DIR',
} as const;

/**
 * Every variable the console function reads: the shared configuration's (stage, table prefix,
 * DynamoDB endpoint locally, secret source, local secrets file) and its own.
 */
export const CONSOLE_FUNCTION_ENV = [
  'SLUICE_STAGE',
  'SLUICE_TABLE_PREFIX',
  'SLUICE_DYNAMODB_ENDPOINT',
  'SLUICE_SECRET_SOURCE',
  'SLUICE_LOCAL_SECRETS_FILE',
  ...Object.values(CONSOLE_ENV),
] as const;

/** The console's validated settings. */
export interface ConsoleConfig {
  /** Scheme, host and port, no trailing slash. */
  readonly origin: string;
  /** The WebAuthn relying party id: the origin's host name. */
  readonly rpId: string;
  readonly rpName: string;
  readonly sessionMs: number;
  readonly assetsDir: string | undefined;
}

function positive(env: NodeJS.ProcessEnv, name: string, fallback: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1 || n > max) throw new Error(`${name} must be a whole number from 1 to ${max}, got ${JSON.stringify(raw)}`);
  return n;
}

/** The value of {@link CONSOLE_ENV.originFrom} that takes the origin from the Function URL. */
export const ORIGIN_FROM_FUNCTION_URL = 'function-url';

/**
 * Reads and validates the console's settings; throws on a bad value so a cold start fails loudly.
 * `functionUrlHost` is the host AWS names in the first request's `requestContext.domainName`,
 * used only when {@link CONSOLE_ENV.originFrom} is `function-url` and no origin is set.
 */
export function loadConsoleConfig(env: NodeJS.ProcessEnv = process.env, functionUrlHost?: string): ConsoleConfig {
  let raw = env[CONSOLE_ENV.origin];
  if ((raw === undefined || raw === '') && env[CONSOLE_ENV.originFrom] === ORIGIN_FROM_FUNCTION_URL) {
    if (functionUrlHost === undefined || functionUrlHost === '') {
      throw new Error(`${CONSOLE_ENV.originFrom}=${ORIGIN_FROM_FUNCTION_URL} needs the Function URL's host (requestContext.domainName)`);
    }
    raw = `https://${functionUrlHost}`;
  }
  if (raw === undefined || raw === '') throw new Error(`${CONSOLE_ENV.origin} must name the console's origin, e.g. https://console.example.com`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`${CONSOLE_ENV.origin} is not a URL: ${JSON.stringify(raw)}`);
  }
  const local = url.hostname === 'localhost';
  // WebAuthn needs a secure context: https, or http on localhost (which browsers treat as secure).
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && local)) {
    throw new Error(`${CONSOLE_ENV.origin} must be https (or http://localhost locally), got ${JSON.stringify(raw)}`);
  }
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '') throw new Error(`${CONSOLE_ENV.origin} must be an origin only (no path), got ${JSON.stringify(raw)}`);
  return Object.freeze({
    origin: url.origin,
    rpId: url.hostname,
    rpName: env[CONSOLE_ENV.rpName] || 'Sluice',
    sessionMs: positive(env, CONSOLE_ENV.sessionMinutes, 720, 7 * 24 * 60) * 60_000,
    assetsDir: env[CONSOLE_ENV.assetsDir] || undefined,
  });
}

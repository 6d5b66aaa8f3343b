/**
 * A provider's base URL as an operator may write it: `http(s)://host[:port]/path` and nothing
 * else. WHATWG URL parsing (what `new URL` and `fetch` do) accepts much more and quietly rewrites
 * it (`https:h/v1`, backslashes, `/../`, tabs inside), and it keeps a `user:password@` in the
 * URL, which would then show in `provider list`, the audit trail and the logs. So the text is
 * checked part by part, and a refusal says which part is wrong without repeating a credential,
 * a query or a fragment (any of which may hold a secret). Pure: no I/O.
 */

/** What every refusal tells the operator to write. */
const SHAPE = 'must be http(s)://host[:port]/path';

/** A host name label (letters, digits, `-`; `_` for internal names such as container names). */
const LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?$/;
/** An IPv6 literal in brackets (its digits and colons; an embedded IPv4 tail allowed). */
const IPV6 = /^\[[0-9A-Fa-f:.]+\]$/;
/** RFC 3986 path characters: unreserved, sub-delims, `:`, `@`, `/` and percent-escapes. */
const PATH = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$/;

/**
 * Why `raw` is not a base URL Sluice accepts, as the rest of a sentence beginning with the
 * field's name (`baseUrl must …`); undefined when it is one. A trailing slash is the caller's to
 * strip or refuse (the import refuses it; `provider add` strips it).
 */
export function baseUrlProblem(raw: string): string | undefined {
  // A URL parser drops tabs and line breaks inside silently, so the stored text would differ.
  if (/[\s\p{Cc}]/u.test(raw)) return `${SHAPE}, with no spaces, tabs, line breaks or control characters`;
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(raw);
  if (scheme === null) return `${SHAPE}: it does not begin with http:// or https://`;
  const name = (scheme[1] as string).toLowerCase();
  if (name !== 'http' && name !== 'https') return `${SHAPE}: the scheme is ${JSON.stringify(scheme[1])}, not http or https`;
  const afterScheme = raw.slice(scheme[0].length);
  if (!afterScheme.startsWith('//')) return `${SHAPE}: // is missing after ${scheme[0]}`;
  const rest = afterScheme.slice(2);
  const end = rest.search(/[/?#\\]/);
  const authority = end < 0 ? rest : rest.slice(0, end);
  const tail = end < 0 ? '' : rest.slice(end);
  if (authority.includes('@')) {
    return 'must not carry a user name or password (user:password@ before the host): a provider\'s key goes through stdin, never into the URL';
  }
  const hostPort = /^(\[[^\]]*\]|[^:]*)(?::([^:]*))?$/.exec(authority);
  const host = hostPort?.[1] ?? '';
  const port = hostPort?.[2];
  if (host === '') return `${SHAPE}: the host is missing`;
  if (hostPort === null || !(IPV6.test(host) || host.split('.').every((label) => LABEL.test(label)))) {
    return `${SHAPE}: the host ${JSON.stringify(authority)} is not a host name, an IPv4 address or a bracketed IPv6 address`;
  }
  if (port !== undefined && (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65_535)) {
    return `${SHAPE}: the port ${JSON.stringify(port)} is not a number from 1 to 65535`;
  }
  if (tail.includes('\\')) return `${SHAPE}: the path holds a backslash`;
  if (tail.includes('?')) return 'must carry no query (?…): only http(s)://host[:port]/path';
  if (tail.includes('#')) return 'must carry no fragment (#…): only http(s)://host[:port]/path';
  if (!PATH.test(tail)) return `${SHAPE}: the path holds a character a URL path cannot (write it percent-encoded)`;
  // A parser resolves dot segments (`%2e` is a dot to it), so the URL called would not be the one written.
  if (tail.split('/').some((segment) => ['.', '..'].includes(segment.replace(/%2e/gi, '.')))) {
    return `${SHAPE}: the path has a . or .. segment`;
  }
  return undefined;
}

/**
 * A base URL with any `user:password@` replaced by `***@`: what a listing shows of an entry
 * written before such URLs were refused, so no credential is printed again.
 */
export function withoutCredentials(url: string): string {
  return url.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/?#\\]*@/, '$1***@');
}

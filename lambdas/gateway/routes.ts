/**
 * The paths Sluice serves, and the one table through which the two endpoint families differ:
 * generic code reads a family's rules here instead of branching on its name.
 */
import type { EndpointFamily } from '../shared/records';

/** How one endpoint family is served. */
export interface FamilyRules {
  readonly family: EndpointFamily;
  /** The client's path, for messages. */
  readonly path: string;
  /** Appended to a provider's base URL. */
  readonly upstreamPath: string;
  /** SPEC's echo: a non-streamed reply to a pinned request gets back the slug the caller sent. */
  readonly echoesModel: boolean;
  /** SPEC: `store: true` is refused 400 `unsupported_value`. */
  readonly refusesStore: boolean;
  /** SPEC rewrite 2: `max_tokens` is added for a provider that refuses a request without one. */
  readonly addsMaxTokens: boolean;
  /** DESIGN decision 4: a stream asks for usage from a provider that reports it only when asked. */
  readonly asksStreamUsage: boolean;
}

/** The endpoint families' rules. */
export const FAMILIES: Readonly<Record<EndpointFamily, FamilyRules>> = {
  chat_completions: {
    family: 'chat_completions',
    path: '/v1/chat/completions',
    upstreamPath: '/chat/completions',
    echoesModel: true,
    refusesStore: false,
    addsMaxTokens: true,
    asksStreamUsage: true,
  },
  responses: {
    family: 'responses',
    path: '/v1/responses',
    upstreamPath: '/responses',
    echoesModel: false,
    refusesStore: true,
    addsMaxTokens: false,
    asksStreamUsage: false,
  },
};

/** What a path names. */
export type Route =
  | { readonly kind: 'completion'; readonly rules: FamilyRules }
  | { readonly kind: 'models' }
  | { readonly kind: 'model'; readonly id: string };

const MODELS = '/v1/models';
const MODEL_PREFIX = '/v1/models/';

/** The route a path names and the one method it serves; undefined for a path Sluice does not serve. */
export function matchRoute(path: string): { readonly route: Route; readonly allow: string } | undefined {
  for (const rules of Object.values(FAMILIES)) {
    if (path === rules.path) return { route: { kind: 'completion', rules }, allow: 'POST' };
  }
  if (path === MODELS) return { route: { kind: 'models' }, allow: 'GET' };
  if (path.startsWith(MODEL_PREFIX) && path.length > MODEL_PREFIX.length) {
    try {
      return { route: { kind: 'model', id: decodeURIComponent(path.slice(MODEL_PREFIX.length)) }, allow: 'GET' };
    } catch {
      return undefined;
    }
  }
  return undefined;
}

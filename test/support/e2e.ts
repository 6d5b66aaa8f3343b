/**
 * Helpers shared by the end-to-end tests: refusals as the official client sees them, exact charges
 * from the catalog rates, extra providers and models written straight into a stack's catalog table,
 * and raw HTTP for the bytes a client library would hide.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { APIError } from 'openai';
import { loadCatalogFiles, modelToItem, providerToItem } from '../../local/ops';
import { chargeMicros, costMicros, promptBound, sizeHold } from '../../lambdas/core/pricing';
import type { CatalogModel, ProviderConfig } from '../../lambdas/shared/catalog-types';
import { tableName } from '../../lambdas/shared/schema';
import type { TokenCounts, UsageRecord } from '../../lambdas/shared/records';
import type { TestStack } from './stack';

/** Awaits a call the gateway must refuse and checks the refusal as the official client surfaces it. */
export async function expectApiError(p: Promise<unknown>, status: number, code: string | null, type?: string, param?: string | null): Promise<APIError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(APIError);
    const e = err as APIError;
    expect({ status: e.status, code: e.code ?? null }).toEqual({ status, code });
    if (type !== undefined) expect(e.type).toBe(type);
    if (param !== undefined) expect(e.param ?? null).toBe(param);
    expect(e.requestID).toMatch(/^req_[0-9a-f]{24}$/);
    return e;
  }
  throw new Error(`expected an APIError ${status} ${String(code)}`);
}

/** A catalog model as the gateway reads it. */
export async function modelOf(stack: TestStack, id: string): Promise<CatalogModel> {
  const m = await stack.wiring.catalog.model(id);
  if (m === undefined) throw new Error(`no catalog model ${id}`);
  return m;
}

/** The exact charge of the provider's counts at a model's catalog rates. */
export async function chargeOn(stack: TestStack, id: string, counts: TokenCounts): Promise<number> {
  const m = await modelOf(stack, id);
  if (m.inputRateThousandths === null || m.outputRateThousandths === null) throw new Error(`no rates for ${id}`);
  return chargeMicros(counts, {
    inputRateThousandths: m.inputRateThousandths,
    cachedInputRateThousandths: m.cachedInputRateThousandths ?? m.inputRateThousandths,
    outputRateThousandths: m.outputRateThousandths,
  });
}

/** Token counts from a chat `usage` object. */
export function chatCounts(u: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null; completion_tokens_details?: { reasoning_tokens?: number } | null }): TokenCounts {
  return {
    inputTokens: u.prompt_tokens,
    cachedInputTokens: u.prompt_tokens_details?.cached_tokens ?? 0,
    outputTokens: u.completion_tokens,
    reasoningTokens: u.completion_tokens_details?.reasoning_tokens ?? 0,
  };
}

/** Token counts from a responses `usage` object. */
export function responsesCounts(u: { input_tokens: number; output_tokens: number; input_tokens_details?: { cached_tokens?: number }; output_tokens_details?: { reasoning_tokens?: number } }): TokenCounts {
  return {
    inputTokens: u.input_tokens,
    cachedInputTokens: u.input_tokens_details?.cached_tokens ?? 0,
    outputTokens: u.output_tokens,
    reasoningTokens: u.output_tokens_details?.reasoning_tokens ?? 0,
  };
}

/** The hold one model needs for a raw request body (SPEC's Limits), as the gateway sizes it. */
export async function holdOn(
  stack: TestStack,
  id: string,
  rawBody: string,
  family: 'chat_completions' | 'responses' = 'chat_completions',
): Promise<{ amountMicros: number; inputMicros: number }> {
  const body = JSON.parse(rawBody) as Record<string, unknown>;
  return sizeHold(await modelOf(stack, id), body, promptBound(Buffer.byteLength(rawBody), body), family);
}

/**
 * The charge of a reply whose counts never arrived: the prompt's bound at the serving model's
 * input rate plus one output token per frame produced, never more than the hold.
 */
export async function estimateOn(
  stack: TestStack,
  id: string,
  rawBody: string,
  frames: number,
  holdMicros: number,
  family: 'chat_completions' | 'responses' = 'chat_completions',
): Promise<number> {
  const m = await modelOf(stack, id);
  const { inputMicros } = await holdOn(stack, id, rawBody, family);
  return Math.min(holdMicros, inputMicros + costMicros(frames, m.outputRateThousandths ?? 0));
}

/** The one usage row of a request. */
export async function rowOf(stack: TestStack, requestId: string | null, workspaceId?: string): Promise<UsageRecord> {
  const rows = await stack.usageRows(workspaceId);
  const row = rows.find((r) => r.requestId === requestId);
  if (row === undefined) throw new Error(`no usage row for ${String(requestId)}`);
  return row;
}

/** The repository's catalog files, to derive extra providers and models from. */
export function catalogFiles(): { providers: ProviderConfig[]; models: CatalogModel[] } {
  return loadCatalogFiles();
}

/** The `local` provider and one of its models from the repository's files. */
export function localProvider(): ProviderConfig {
  const p = catalogFiles().providers.find((x) => x.name === 'local');
  if (p === undefined) throw new Error('no local provider');
  return p;
}

export function fileModel(id: string): CatalogModel {
  const m = catalogFiles().models.find((x) => x.id === id);
  if (m === undefined) throw new Error(`no model ${id} in config/catalog.json`);
  return m;
}

/** A copy of a repository model under another provider (same provider model id, so the same simulator script). */
export function modelUnder(provider: string, fromId: string, overrides: Partial<CatalogModel> = {}): CatalogModel {
  const m = fileModel(fromId);
  return { ...m, id: `${provider}/${m.providerModelId}`, provider, ...overrides };
}

/** Writes extra providers and models into the stack's catalog table (nothing is pruned). */
export async function addToCatalog(stack: TestStack, providers: readonly ProviderConfig[], models: readonly CatalogModel[]): Promise<void> {
  const table = tableName(stack.tables.prefix, 'catalog');
  for (const p of providers) await stack.tables.doc.send(new PutCommand({ TableName: table, Item: providerToItem(p) }));
  for (const m of models) await stack.tables.doc.send(new PutCommand({ TableName: table, Item: modelToItem(m) }));
}

/** A POST as raw bytes, read whole: what a client library would parse. */
export async function rawPost(stack: TestStack, path: string, body: string, key = stack.rawKey): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(`${stack.baseURL}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body,
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** The frames of an event stream (blank-line separated), without the separators. */
export function framesOf(text: string): string[] {
  return text.split('\n\n').filter((f) => f !== '');
}

/** The JSON of the `:x-sluice-usage` comment frame. */
export function usageCommentOf(frame: string | undefined): { prompt_tokens: number; completion_tokens: number; cached_tokens: number; charge_micros: number; estimated: boolean } {
  if (frame === undefined || !frame.startsWith(':x-sluice-usage ')) throw new Error(`not a usage comment: ${String(frame)}`);
  return JSON.parse(frame.slice(':x-sluice-usage '.length)) as { prompt_tokens: number; completion_tokens: number; cached_tokens: number; charge_micros: number; estimated: boolean };
}

/** The `data:` JSON of a frame, or undefined for a comment or `[DONE]`. */
export function dataOf(frame: string): Record<string, unknown> | undefined {
  const line = frame.split('\n').find((l) => l.startsWith('data: '));
  if (line === undefined || line === 'data: [DONE]') return undefined;
  return JSON.parse(line.slice(6)) as Record<string, unknown>;
}

/** A port nothing listens on (bound, then closed). */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A provider that answers every POST with fixed bytes (for streams the simulator cannot produce). */
export interface FixedUpstream {
  readonly url: string;
  /** Sets what the next requests get. */
  reply(status: number, contentType: string, body: string): void;
  readonly bodies: string[];
  close(): Promise<void>;
}

export async function fixedUpstream(): Promise<FixedUpstream> {
  let status = 200;
  let contentType = 'application/json';
  let payload = '{}';
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(status, { 'content-type': contentType });
      res.end(payload);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    bodies,
    reply(s, ct, b) {
      status = s;
      contentType = ct;
      payload = b;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

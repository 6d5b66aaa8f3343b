/**
 * The endpoint-neutral decision about one reply: which tokens, which tool calls, which counts.
 * Chat and responses each turn their request into a {@link PlanRequest} and render the plan in
 * their own wire shape, so the counting rules (ceiling, reasoning, cached tokens) exist once.
 */
import type { ReplyOptions } from './behavior';
import { arraySeq, fragments, sampleFromSchema, splitWords, takeSeq, wordSeq, WORDS, type TokenSeq } from './tokens';

/** Completion tokens of a generated reply when the behavior does not say. */
export const DEFAULT_COMPLETION_TOKENS = 12;

/** The function the request asks to be called. */
export interface ToolTarget {
  readonly name: string;
  /** The function's JSON Schema; the arguments are sampled from it. */
  readonly parameters: unknown;
}

/** Structured output the request asked for. */
export type StructuredOutput = { readonly kind: 'json_object' } | { readonly kind: 'json_schema'; readonly schema: unknown };

/** What an endpoint extracted from its request body. */
export interface PlanRequest {
  readonly model: string;
  /** Prompt tokens as this endpoint counts them. */
  readonly countedPromptTokens: number;
  /** UTF-8 length of the request body: the hard upper bound on prompt tokens. */
  readonly bodyBytes: number;
  /** max_tokens / max_completion_tokens / max_output_tokens, when given. */
  readonly ceiling: number | undefined;
  /** Set when the reply should be a tool call. */
  readonly tool: ToolTarget | undefined;
  readonly structured: StructuredOutput | undefined;
}

/** One tool call in the reply. */
export interface PlannedToolCall {
  /** `call_...`, the id a client answers with. */
  readonly callId: string;
  readonly name: string;
  /** Argument fragments as streamed; joined, they are `arguments`. */
  readonly fragments: readonly string[];
  readonly arguments: string;
}

/** Everything a renderer needs, already capped. */
export interface ReplyPlan {
  /** The model the reply names; null leaves the field out. */
  readonly model: string | null;
  /** Text tokens; empty for a tool-call reply. */
  readonly text: TokenSeq;
  /** Non-empty exactly when the reply is a tool call. */
  readonly toolCalls: readonly PlannedToolCall[];
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly reasoningTokens: number;
  /** Includes the reasoning tokens, as OpenAI counts them. */
  readonly completionTokens: number;
  /** The ceiling cut the reply short (finish_reason `length`, status `incomplete`). */
  readonly truncated: boolean;
  readonly reportUsage: boolean;
}

/** Source of unique ids; one per simulator so ids never collide across its requests. */
export class IdSource {
  private counter = 0;
  private readonly prefix = Math.floor(Math.random() * 0xffffffff).toString(36);

  /** A fresh id starting with `prefix` (e.g. `chatcmpl-`, `resp_`, `call_`). */
  next(prefix: string): string {
    this.counter += 1;
    return `${prefix}sim${this.prefix}${this.counter.toString(36).padStart(6, '0')}`;
  }
}

function structuredText(structured: StructuredOutput): string {
  if (structured.kind === 'json_object') {
    return JSON.stringify({ answer: WORDS.slice(0, 3).join(' ') });
  }
  return JSON.stringify(sampleFromSchema(structured.schema));
}

function sampleArguments(parameters: unknown): string {
  const sample = sampleFromSchema(parameters);
  return JSON.stringify(typeof sample === 'object' && sample !== null && !Array.isArray(sample) ? sample : {});
}

/** Cuts tool calls to `budget` fragments in order; the first call survives even with none left. */
function capToolCalls(calls: readonly PlannedToolCall[], budget: number): PlannedToolCall[] {
  const out: PlannedToolCall[] = [];
  let left = budget;
  for (const call of calls) {
    if (left <= 0 && out.length > 0) break;
    const kept = call.fragments.slice(0, Math.max(left, 0));
    left -= kept.length;
    out.push({ ...call, fragments: kept, arguments: kept.join('') });
  }
  return out;
}

/** Decides the reply for one request under one behavior's reply options. */
export function planReply(request: PlanRequest, options: ReplyOptions, ids: IdSource): ReplyPlan {
  const promptTokens = Math.min(options.promptTokens ?? request.countedPromptTokens, request.bodyBytes);
  const cachedTokens = Math.min(options.cachedTokens ?? 0, promptTokens);
  const wantedReasoning = options.reasoningTokens ?? 0;

  const scripted = options.toolCalls;
  const rawCalls =
    scripted !== undefined && scripted.length > 0
      ? scripted
      : request.tool !== undefined
        ? [{ name: request.tool.name, arguments: sampleArguments(request.tool.parameters) }]
        : [];
  let toolCalls: PlannedToolCall[] = rawCalls.map((c) => {
    const pieces = fragments(c.arguments);
    return { callId: ids.next('call_'), name: c.name, fragments: pieces, arguments: c.arguments };
  });

  let text: TokenSeq;
  if (toolCalls.length > 0) text = arraySeq([]);
  else if (options.text !== undefined) text = arraySeq(splitWords(options.text));
  else if (request.structured !== undefined) text = arraySeq(fragments(structuredText(request.structured)));
  else text = wordSeq(options.completionTokens ?? DEFAULT_COMPLETION_TOKENS);

  const visible = toolCalls.length > 0 ? toolCalls.reduce((n, c) => n + c.fragments.length, 0) : text.length;
  const wantedCompletion = options.completionTokens ?? visible;
  const ceiling = request.ceiling;
  const truncated = ceiling !== undefined && options.ignoreCeiling !== true && wantedCompletion + wantedReasoning > ceiling;

  let reasoningTokens = wantedReasoning;
  let completion = wantedCompletion;
  if (truncated) {
    // Reasoning happens before the answer, so it spends the budget first.
    reasoningTokens = Math.min(wantedReasoning, ceiling);
    completion = ceiling - reasoningTokens;
    if (toolCalls.length > 0) toolCalls = capToolCalls(toolCalls, completion);
    else text = takeSeq(text, completion);
  }

  return {
    model: options.responseModel === undefined ? request.model : options.responseModel,
    text,
    toolCalls,
    promptTokens,
    cachedTokens,
    reasoningTokens,
    completionTokens: completion + reasoningTokens,
    truncated,
    reportUsage: options.omitUsage !== true,
  };
}

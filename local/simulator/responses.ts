/**
 * `POST /v1/responses`: reads the request into a plan and renders it as a `Response` object or
 * as the typed event stream (`event:` + `data:` frames with sequence numbers, no `[DONE]`).
 */
import { invalidParam } from './errors';
import type { PlanRequest, ReplyPlan, StructuredOutput, ToolTarget } from './plan';
import { joinSeq } from './tokens';
import type { ReplyMeta } from './chat';
import {
  isRecord,
  readCeiling,
  refuse,
  splitAtMark,
  TEXT_MARK,
  TOKENS_PER_IMAGE,
  TOKENS_PER_MESSAGE,
  unixSeconds,
  words,
  type Parsed,
  type SplitBody,
} from './wire';

/**
 * Request fields a `Response` object echoes back. Kept as read, except function tools, which
 * OpenAI returns normalized (`strict` and `parameters` always present).
 */
export interface ResponseEcho {
  readonly instructions: string | null;
  readonly maxOutputTokens: number | null;
  readonly temperature: number;
  readonly topP: number;
  readonly tools: readonly unknown[];
  readonly toolChoice: unknown;
  readonly parallelToolCalls: boolean;
  readonly metadata: unknown;
  readonly text: unknown;
  readonly previousResponseId: string | null;
  readonly store: boolean;
}

/** What the server needs to know about a responses request. */
export interface ResponsesRequest {
  readonly plan: PlanRequest;
  readonly stream: boolean;
  readonly echo: ResponseEcho;
}

function countContent(content: unknown): number {
  if (typeof content === 'string') return words(content);
  if (!Array.isArray(content)) return 0;
  let tokens = 0;
  for (const part of content) {
    if (!isRecord(part)) continue;
    tokens += part.type === 'input_image' ? TOKENS_PER_IMAGE : words(part.text);
  }
  return tokens;
}

function countInputTokens(instructions: unknown, input: unknown): number {
  let tokens = typeof instructions === 'string' ? TOKENS_PER_MESSAGE + words(instructions) : 0;
  if (typeof input === 'string') return tokens + TOKENS_PER_MESSAGE + words(input);
  if (!Array.isArray(input)) return tokens;
  for (const item of input) {
    tokens += TOKENS_PER_MESSAGE;
    if (!isRecord(item)) continue;
    if (item.type === 'function_call') tokens += words(item.arguments);
    else if (item.type === 'function_call_output') tokens += words(item.output);
    else tokens += countContent(item.content);
  }
  return tokens;
}

function readFunctionTools(tools: unknown): { echo: unknown[]; functions: ToolTarget[] } {
  const echo: unknown[] = [];
  const functions: ToolTarget[] = [];
  if (!Array.isArray(tools)) return { echo, functions };
  for (const tool of tools) {
    if (isRecord(tool) && tool.type === 'function' && typeof tool.name === 'string') {
      functions.push({ name: tool.name, parameters: tool.parameters });
      const normalized: Record<string, unknown> = { type: 'function', name: tool.name };
      if (typeof tool.description === 'string') normalized.description = tool.description;
      normalized.parameters = isRecord(tool.parameters) ? tool.parameters : null;
      normalized.strict = typeof tool.strict === 'boolean' ? tool.strict : true;
      echo.push(normalized);
    } else {
      echo.push(tool);
    }
  }
  return { echo, functions };
}

function readToolTarget(functions: readonly ToolTarget[], choice: unknown, input: unknown): ToolTarget | undefined {
  if (functions.length === 0 || choice === 'none') return undefined;
  // A function result is what the model was waiting for: it now answers in words.
  if (Array.isArray(input)) {
    const last: unknown = input[input.length - 1];
    if (isRecord(last) && last.type === 'function_call_output') return undefined;
  }
  if (isRecord(choice) && choice.type === 'function' && typeof choice.name === 'string') {
    const name = choice.name;
    return functions.find((f) => f.name === name) ?? { name, parameters: undefined };
  }
  return functions[0];
}

function readStructured(text: unknown): StructuredOutput | undefined {
  if (!isRecord(text) || !isRecord(text.format)) return undefined;
  if (text.format.type === 'json_object') return { kind: 'json_object' };
  if (text.format.type === 'json_schema') return { kind: 'json_schema', schema: text.format.schema };
  return undefined;
}

/** Reads a responses request, refusing what OpenAI would refuse before generating. */
export function readResponsesRequest(json: unknown, bodyBytes: number, requireMaxTokens: boolean): Parsed<ResponsesRequest> {
  if (!isRecord(json)) return refuse(400, invalidParam('input', 'The request body must be a JSON object.', 'invalid_type'));
  if (typeof json.model !== 'string' || json.model.length === 0) {
    return refuse(400, invalidParam('model', "Missing required parameter: 'model'.", 'missing_required_parameter'));
  }
  const input = json.input;
  if (input !== undefined && typeof input !== 'string' && !Array.isArray(input)) {
    return refuse(400, invalidParam('input', "Invalid type for 'input': expected one of a string or an array, but got an object instead.", 'invalid_type'));
  }
  const ceiling = readCeiling(json, 'max_output_tokens');
  if (!ceiling.ok) return ceiling;
  if (requireMaxTokens && ceiling.value === undefined) {
    return refuse(400, invalidParam('max_output_tokens', "Missing required parameter: 'max_output_tokens'.", 'missing_required_parameter'));
  }
  const tools = readFunctionTools(json.tools);
  return {
    ok: true,
    value: {
      stream: json.stream === true,
      plan: {
        model: json.model,
        countedPromptTokens: countInputTokens(json.instructions, input),
        bodyBytes,
        ceiling: ceiling.value,
        tool: readToolTarget(tools.functions, json.tool_choice, input),
        structured: readStructured(json.text),
      },
      echo: {
        instructions: typeof json.instructions === 'string' ? json.instructions : null,
        maxOutputTokens: ceiling.value ?? null,
        temperature: typeof json.temperature === 'number' ? json.temperature : 1,
        topP: typeof json.top_p === 'number' ? json.top_p : 1,
        tools: tools.echo,
        toolChoice: json.tool_choice ?? 'auto',
        parallelToolCalls: typeof json.parallel_tool_calls === 'boolean' ? json.parallel_tool_calls : true,
        metadata: isRecord(json.metadata) ? json.metadata : {},
        text: isRecord(json.text) && isRecord(json.text.format) ? json.text : { format: { type: 'text' } },
        previousResponseId: typeof json.previous_response_id === 'string' ? json.previous_response_id : null,
        store: typeof json.store === 'boolean' ? json.store : true,
      },
    },
  };
}

/** OpenAI's responses `usage` object. */
export function responsesUsage(plan: ReplyPlan): Record<string, unknown> {
  return {
    input_tokens: plan.promptTokens,
    input_tokens_details: { cached_tokens: plan.cachedTokens, cache_write_tokens: 0 },
    output_tokens: plan.completionTokens,
    output_tokens_details: { reasoning_tokens: plan.reasoningTokens },
    total_tokens: plan.promptTokens + plan.completionTokens,
  };
}

/** Item ids derive from the response id so one reply's ids are related and never collide. */
function messageId(meta: ReplyMeta): string {
  return meta.id.replace(/^resp_/, 'msg_');
}

function functionCallId(meta: ReplyMeta, index: number): string {
  return `${meta.id.replace(/^resp_/, 'fc_')}${index}`;
}

type ItemStatus = 'in_progress' | 'completed' | 'incomplete';

function textPart(text: string): Record<string, unknown> {
  return { type: 'output_text', annotations: [], logprobs: [], text };
}

function messageItem(meta: ReplyMeta, status: ItemStatus, content: readonly unknown[]): Record<string, unknown> {
  return { id: messageId(meta), type: 'message', status, content, role: 'assistant' };
}

function functionCallItem(plan: ReplyPlan, meta: ReplyMeta, index: number, status: ItemStatus, args: string): Record<string, unknown> {
  const call = plan.toolCalls[index];
  return { id: functionCallId(meta, index), type: 'function_call', status, arguments: args, call_id: call.callId, name: call.name };
}

/** Items of the finished reply; `text` is the full text or {@link TEXT_MARK}. */
function finalOutput(plan: ReplyPlan, meta: ReplyMeta, text: string): unknown[] {
  const status: ItemStatus = plan.truncated ? 'incomplete' : 'completed';
  if (plan.toolCalls.length > 0) return plan.toolCalls.map((c, k) => functionCallItem(plan, meta, k, status, c.arguments));
  return [messageItem(meta, status, [textPart(text)])];
}

/** The `Response` object; `output` empty and no usage while in progress. */
function responseObject(plan: ReplyPlan, meta: ReplyMeta, echo: ResponseEcho, output: unknown[] | undefined): Record<string, unknown> {
  const done = output !== undefined;
  const status = !done ? 'in_progress' : plan.truncated ? 'incomplete' : 'completed';
  const body: Record<string, unknown> = {
    id: meta.id,
    object: 'response',
    created_at: meta.created,
    status,
    background: false,
    completed_at: status === 'completed' ? unixSeconds() : null,
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: echo.instructions,
    max_output_tokens: echo.maxOutputTokens,
    max_tool_calls: null,
  };
  if (plan.model !== null) body.model = plan.model;
  Object.assign(body, {
    output: output ?? [],
    parallel_tool_calls: echo.parallelToolCalls,
    previous_response_id: echo.previousResponseId,
    prompt_cache_key: null,
    reasoning: { effort: null, summary: null },
    safety_identifier: null,
    service_tier: 'default',
    store: echo.store,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.toolChoice,
    tools: echo.tools,
    top_logprobs: 0,
    top_p: echo.topP,
    truncation: 'disabled',
  });
  if (done && plan.reportUsage) body.usage = responsesUsage(plan);
  body.metadata = echo.metadata;
  return body;
}

/** The non-streamed `Response` body, cut at its text so a huge reply is written in pieces. */
export function responseBody(plan: ReplyPlan, meta: ReplyMeta, echo: ResponseEcho): SplitBody {
  return splitAtMark(responseObject(plan, meta, echo, finalOutput(plan, meta, TEXT_MARK)), plan.text);
}

/**
 * The event stream, produced lazily with consecutive sequence numbers. The `.done` events and
 * the final response repeat the whole text (the protocol requires it), so only these hold it.
 */
export function* responseStreamFrames(plan: ReplyPlan, meta: ReplyMeta, echo: ResponseEcho): Generator<string, void, undefined> {
  let sequence = 0;
  const frame = (type: string, fields: Record<string, unknown>): string =>
    `event: ${type}\ndata: ${JSON.stringify({ type, ...fields, sequence_number: sequence++ })}\n\n`;
  const itemStatus: ItemStatus = plan.truncated ? 'incomplete' : 'completed';

  yield frame('response.created', { response: responseObject(plan, meta, echo, undefined) });
  yield frame('response.in_progress', { response: responseObject(plan, meta, echo, undefined) });

  // Joined once, after the deltas, and only because the protocol repeats it in full.
  let text = '';
  if (plan.toolCalls.length > 0) {
    for (let k = 0; k < plan.toolCalls.length; k++) {
      const call = plan.toolCalls[k];
      const itemId = functionCallId(meta, k);
      yield frame('response.output_item.added', { output_index: k, item: functionCallItem(plan, meta, k, 'in_progress', '') });
      for (const delta of call.fragments) {
        yield frame('response.function_call_arguments.delta', { item_id: itemId, output_index: k, delta });
      }
      yield frame('response.function_call_arguments.done', { item_id: itemId, name: call.name, output_index: k, arguments: call.arguments });
      yield frame('response.output_item.done', { output_index: k, item: functionCallItem(plan, meta, k, itemStatus, call.arguments) });
    }
  } else {
    const at = { item_id: messageId(meta), output_index: 0, content_index: 0 };
    yield frame('response.output_item.added', { output_index: 0, item: messageItem(meta, 'in_progress', []) });
    yield frame('response.content_part.added', { ...at, part: textPart('') });
    for (let i = 0; i < plan.text.length; i++) {
      yield frame('response.output_text.delta', { ...at, delta: plan.text.at(i), logprobs: [] });
    }
    text = joinSeq(plan.text);
    yield frame('response.output_text.done', { ...at, text, logprobs: [] });
    yield frame('response.content_part.done', { ...at, part: textPart(text) });
    yield frame('response.output_item.done', { output_index: 0, item: messageItem(meta, itemStatus, [textPart(text)]) });
  }
  const finished = responseObject(plan, meta, echo, finalOutput(plan, meta, text));
  yield frame(plan.truncated ? 'response.incomplete' : 'response.completed', { response: finished });
}

/** A responses frame whose data is not JSON, for the `malformed` behavior. */
export function malformedResponsesFrame(): string {
  return 'event: response.output_text.delta\ndata: {"type":"response.output_text.delta", not json\n\n';
}

/** OpenAI's in-band `error` event, for the `stream-error` behavior. */
export function responsesErrorFrame(error: { message: string; param: string | null; code: string | null }, sequence: number): string {
  return `event: error\ndata: ${JSON.stringify({ type: 'error', code: error.code, message: error.message, param: error.param, sequence_number: sequence })}\n\n`;
}

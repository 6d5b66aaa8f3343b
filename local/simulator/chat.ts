/**
 * `POST /v1/chat/completions`: reads the request into a plan and renders the plan as OpenAI
 * does, as one body or as `chat.completion.chunk` frames.
 */
import { invalidParam } from './errors';
import type { PlanRequest, ReplyPlan, StructuredOutput, ToolTarget } from './plan';
import {
  isRecord,
  readCeiling,
  refuse,
  splitAtMark,
  TEXT_MARK,
  TOKENS_PER_IMAGE,
  TOKENS_PER_MESSAGE,
  words,
  type Parsed,
  type SplitBody,
} from './wire';

/** What the server needs to know about a chat request. */
export interface ChatRequest {
  readonly plan: PlanRequest;
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

/** Identity shared by the body or every chunk of one reply. */
export interface ReplyMeta {
  readonly id: string;
  readonly created: number;
  readonly fingerprint: string;
}

function countMessageTokens(messages: readonly unknown[]): number {
  let tokens = 0;
  for (const message of messages) {
    tokens += TOKENS_PER_MESSAGE;
    if (!isRecord(message)) continue;
    const content = message.content;
    if (typeof content === 'string') tokens += words(content);
    else if (Array.isArray(content)) {
      for (const part of content) {
        if (!isRecord(part)) continue;
        if (part.type === 'image_url') tokens += TOKENS_PER_IMAGE;
        else tokens += words(part.text);
      }
    }
    if (Array.isArray(message.tool_calls)) {
      for (const call of message.tool_calls) {
        if (isRecord(call) && isRecord(call.function)) tokens += words(call.function.arguments) + 1;
      }
    }
  }
  return tokens;
}

function readToolTarget(body: Record<string, unknown>, messages: readonly unknown[]): ToolTarget | undefined {
  if (!Array.isArray(body.tools)) return undefined;
  const functions: ToolTarget[] = [];
  for (const tool of body.tools) {
    if (isRecord(tool) && tool.type === 'function' && isRecord(tool.function) && typeof tool.function.name === 'string') {
      functions.push({ name: tool.function.name, parameters: tool.function.parameters });
    }
  }
  const choice = body.tool_choice;
  if (functions.length === 0 || choice === 'none') return undefined;
  // A tool result is what the model was waiting for: it now answers in words.
  const last = messages[messages.length - 1];
  if (isRecord(last) && last.role === 'tool') return undefined;
  if (isRecord(choice) && choice.type === 'function' && isRecord(choice.function) && typeof choice.function.name === 'string') {
    const name = choice.function.name;
    return functions.find((f) => f.name === name) ?? { name, parameters: undefined };
  }
  return functions[0];
}

function readStructured(format: unknown): StructuredOutput | undefined {
  if (!isRecord(format)) return undefined;
  if (format.type === 'json_object') return { kind: 'json_object' };
  if (format.type === 'json_schema') {
    return { kind: 'json_schema', schema: isRecord(format.json_schema) ? format.json_schema.schema : undefined };
  }
  return undefined;
}

/** Reads a chat request, refusing what OpenAI would refuse before generating. */
export function readChatRequest(json: unknown, bodyBytes: number, requireMaxTokens: boolean): Parsed<ChatRequest> {
  if (!isRecord(json)) return refuse(400, invalidParam('messages', 'The request body must be a JSON object.', 'invalid_type'));
  if (typeof json.model !== 'string' || json.model.length === 0) {
    return refuse(400, invalidParam('model', "Missing required parameter: 'model'.", 'missing_required_parameter'));
  }
  const messages = json.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    return refuse(
      400,
      Array.isArray(messages)
        ? invalidParam('messages', "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", 'empty_array')
        : invalidParam('messages', "Missing required parameter: 'messages'.", 'missing_required_parameter'),
    );
  }
  const maxTokens = readCeiling(json, 'max_tokens');
  if (!maxTokens.ok) return maxTokens;
  const maxCompletion = readCeiling(json, 'max_completion_tokens');
  if (!maxCompletion.ok) return maxCompletion;
  if (requireMaxTokens && maxTokens.value === undefined && maxCompletion.value === undefined) {
    return refuse(400, invalidParam('max_tokens', "Missing required parameter: 'max_tokens'.", 'missing_required_parameter'));
  }
  const ceilings = [maxTokens.value, maxCompletion.value].filter((v): v is number => v !== undefined);
  const streamOptions = json.stream_options;
  return {
    ok: true,
    value: {
      stream: json.stream === true,
      includeUsage: isRecord(streamOptions) && streamOptions.include_usage === true,
      plan: {
        model: json.model,
        countedPromptTokens: countMessageTokens(messages),
        bodyBytes,
        ceiling: ceilings.length > 0 ? Math.max(...ceilings) : undefined,
        tool: readToolTarget(json, messages),
        structured: readStructured(json.response_format),
      },
    },
  };
}

function finishReason(plan: ReplyPlan): 'stop' | 'length' | 'tool_calls' {
  if (plan.truncated) return 'length';
  return plan.toolCalls.length > 0 ? 'tool_calls' : 'stop';
}

/** OpenAI's chat `usage` object, every detail field present. */
export function chatUsage(plan: ReplyPlan): Record<string, unknown> {
  return {
    prompt_tokens: plan.promptTokens,
    completion_tokens: plan.completionTokens,
    total_tokens: plan.promptTokens + plan.completionTokens,
    prompt_tokens_details: { cached_tokens: plan.cachedTokens, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: plan.reasoningTokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

/**
 * The non-streamed `chat.completion` body, cut at its content so a huge reply is written in
 * pieces instead of built as one string.
 */
export function chatCompletionBody(plan: ReplyPlan, meta: ReplyMeta): SplitBody {
  const tools = plan.toolCalls.length > 0;
  const message: Record<string, unknown> = {
    role: 'assistant',
    content: tools ? null : TEXT_MARK,
    refusal: null,
    annotations: [],
  };
  if (tools) {
    message.tool_calls = plan.toolCalls.map((c) => ({
      id: c.callId,
      type: 'function',
      function: { name: c.name, arguments: c.arguments },
    }));
  }
  const body: Record<string, unknown> = { id: meta.id, object: 'chat.completion', created: meta.created };
  if (plan.model !== null) body.model = plan.model;
  body.choices = [{ index: 0, message, logprobs: null, finish_reason: finishReason(plan) }];
  if (plan.reportUsage) body.usage = chatUsage(plan);
  body.service_tier = 'default';
  body.system_fingerprint = meta.fingerprint;
  return splitAtMark(body, plan.text);
}

/** The SSE frame terminating a chat stream; never counted as a chunk. */
export const CHAT_DONE_FRAME = 'data: [DONE]\n\n';

/**
 * The chat stream's frames, produced lazily: the role chunk, one chunk per token (or per
 * argument fragment), the finish chunk, and the usage chunk when the client asked for it.
 * Content chunks are spliced from precomputed halves because they are the hot path.
 */
export function* chatStreamFrames(plan: ReplyPlan, meta: ReplyMeta, includeUsage: boolean): Generator<string, void, undefined> {
  const model = plan.model === null ? '' : `"model":${JSON.stringify(plan.model)},`;
  const head =
    `data: {"id":${JSON.stringify(meta.id)},"object":"chat.completion.chunk","created":${meta.created},` +
    `${model}"service_tier":"default","system_fingerprint":${JSON.stringify(meta.fingerprint)},"choices":`;
  const tail = includeUsage ? ',"usage":null}\n\n' : '}\n\n';
  const choice = (delta: unknown, finish: string | null): string =>
    head + JSON.stringify([{ index: 0, delta, logprobs: null, finish_reason: finish }]) + tail;

  if (plan.toolCalls.length > 0) {
    for (let k = 0; k < plan.toolCalls.length; k++) {
      const call = plan.toolCalls[k];
      const opening = { index: k, id: call.callId, type: 'function', function: { name: call.name, arguments: '' } };
      // OpenAI opens a tool-call reply with the role and a null content on the first call's delta.
      yield choice(k === 0 ? { role: 'assistant', content: null, tool_calls: [opening], refusal: null } : { tool_calls: [opening] }, null);
      for (const fragment of call.fragments) {
        yield choice({ tool_calls: [{ index: k, function: { arguments: fragment } }] }, null);
      }
    }
  } else {
    yield choice({ role: 'assistant', content: '', refusal: null }, null);
    const before = head + '[{"index":0,"delta":{"content":';
    const after = '},"logprobs":null,"finish_reason":null}]' + tail;
    for (let i = 0; i < plan.text.length; i++) yield before + JSON.stringify(plan.text.at(i)) + after;
  }
  yield choice({}, finishReason(plan));
  if (includeUsage && plan.reportUsage) {
    yield `${head}[],"usage":${JSON.stringify(chatUsage(plan))}}\n\n`;
  }
}

/** A chat data frame that is not JSON, for the `malformed` behavior. */
export function malformedChatFrame(meta: ReplyMeta): string {
  return `data: {"id":${JSON.stringify(meta.id)},"object":"chat.completion.chunk","choices":[{"delta": not json\n\n`;
}

/** A chat in-band error frame, for the `stream-error` behavior. */
export function chatErrorFrame(body: unknown): string {
  return `data: ${JSON.stringify(body)}\n\n`;
}

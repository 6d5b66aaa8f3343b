/**
 * OpenAI `ErrorResponse` bodies as the real API words them, so the gateway's relaying of a
 * provider's refusal ("status and wording") is tested against realistic input.
 */

/** OpenAI's error envelope. */
export interface OpenAiErrorBody {
  readonly error: {
    readonly message: string;
    readonly type: string;
    readonly param: string | null;
    readonly code: string | null;
  };
}

/** Field overrides for a default error. */
export interface ErrorFields {
  readonly message?: string;
  readonly type?: string;
  readonly param?: string | null;
  readonly code?: string | null;
}

/** Builds the envelope. */
export function errorBody(message: string, type: string, param: string | null, code: string | null): OpenAiErrorBody {
  return { error: { message, type, param, code } };
}

function defaultFields(status: number, model: string | undefined, param: string | null | undefined): Required<ErrorFields> {
  const name = model ?? 'unknown';
  switch (status) {
    case 400:
      return param
        ? {
            message: `Unsupported value: '${param}' does not support the given value with this model.`,
            type: 'invalid_request_error',
            param,
            code: 'unsupported_value',
          }
        : { message: 'Invalid request.', type: 'invalid_request_error', param: null, code: null };
    case 401:
      return invalidApiKey('sk-sim').error;
    case 403:
      return { message: 'You are not allowed to sample from this model.', type: 'invalid_request_error', param: null, code: null };
    case 404:
      return {
        message: `The model \`${name}\` does not exist or you do not have access to it.`,
        type: 'invalid_request_error',
        param: null,
        code: 'model_not_found',
      };
    case 429:
      return {
        message: `Rate limit reached for ${name} on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.`,
        type: 'requests',
        param: null,
        code: 'rate_limit_exceeded',
      };
    case 503:
      return { message: 'The engine is currently overloaded, please try again later.', type: 'server_error', param: null, code: null };
    default:
      return status >= 500
        ? { message: 'The server had an error while processing your request. Sorry about that!', type: 'server_error', param: null, code: null }
        : { message: `Request failed with status ${status}.`, type: 'invalid_request_error', param: null, code: null };
  }
}

/** The body OpenAI would send with `status`, with any fields overridden. */
export function defaultError(status: number, model: string | undefined, fields: ErrorFields = {}): OpenAiErrorBody {
  const base = defaultFields(status, model, fields.param);
  return errorBody(
    fields.message ?? base.message,
    fields.type ?? base.type,
    fields.param !== undefined ? fields.param : base.param,
    fields.code !== undefined ? fields.code : base.code,
  );
}

function maskKey(key: string): string {
  return key.length <= 8 ? `${key.slice(0, 2)}***` : `${key.slice(0, 3)}***${key.slice(-4)}`;
}

/** OpenAI's 401 for a wrong key (shown masked, as OpenAI does). */
export function invalidApiKey(key: string): OpenAiErrorBody {
  return errorBody(
    `Incorrect API key provided: ${maskKey(key)}. You can find your API key at https://platform.openai.com/account/api-keys.`,
    'invalid_request_error',
    null,
    'invalid_api_key',
  );
}

/**
 * OpenAI's 401 for a missing key. OpenAI itself sends code null here; the simulator says
 * invalid_api_key so a caller can treat both 401s alike.
 */
export function missingApiKey(): OpenAiErrorBody {
  return errorBody(
    "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
    'invalid_request_error',
    null,
    'invalid_api_key',
  );
}

/** A request parameter OpenAI would refuse before generating anything. */
export function invalidParam(param: string, message: string, code: string | null): OpenAiErrorBody {
  return errorBody(message, 'invalid_request_error', param, code);
}

/** OpenAI's answer to a body that is not JSON. */
export function unparsableBody(): OpenAiErrorBody {
  return errorBody(
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
    'invalid_request_error',
    null,
    null,
  );
}

/** OpenAI's answer to a path it does not serve. */
export function invalidUrl(method: string, path: string): OpenAiErrorBody {
  return errorBody(`Invalid URL (${method} ${path})`, 'invalid_request_error', null, null);
}

/**
 * The upstream simulator: an OpenAI-compatible provider on loopback for local mode, tests and
 * benchmarks. See `server.ts` for the API and `behavior.ts` for what can be scripted.
 *
 * Control surface for use from another process (JSON bodies, no auth, never recorded):
 * - `POST /_sim/script`   `{"model": string, "behaviors": Behavior[]}`  queue one-shot behaviors
 * - `POST /_sim/default`  `{"model": string | "*", "behavior": Behavior}`  standing behavior
 * - `POST /_sim/reset`    clear scripts, defaults and recorded requests
 * - `GET /_sim/recorded`  the recorded requests as a JSON array; `DELETE` clears them
 */
export { startSimulator, type RecordedRequest, type Simulator, type SimulatorOptions } from './server';
export {
  BehaviorError,
  parseBehavior,
  type Behavior,
  type ErrorBehavior,
  type MalformedBehavior,
  type OkBehavior,
  type ReplyOptions,
  type ResetBehavior,
  type ScriptedToolCall,
  type StallBehavior,
  type StreamErrorBehavior,
} from './behavior';
export { DEFAULT_COMPLETION_TOKENS } from './plan';
export { WORDS } from './tokens';

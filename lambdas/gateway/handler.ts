/**
 * Lambda entry of the gateway behind a Function URL in RESPONSE_STREAM mode: a `@middy/core`
 * handler with middy's response streaming (`streaming.ts`). Thin: the adapters are built once at
 * module scope (cold start), each invocation is decoded and served by the use case.
 */
import { loadConfig } from '../shared/config';
import { streamingHandler } from './streaming';
import { buildGateway } from './wiring';

const config = loadConfig();
const { gateway } = buildGateway(config, process.env);

export const handler = streamingHandler(gateway);

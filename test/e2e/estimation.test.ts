/**
 * Charges when the provider's counts are missing (issue 14, item 5): the prompt and the reply are
 * counted with the model's tokenizer (o200k by default), not taken from body bytes, marked
 * `"estimated": true` on the usage comment and the usage row, and never above the hold. Covers a
 * provider that reports nothing (non-streamed: its output is charged too; streamed), a stream that
 * broke off, and a stream cut by `balance_exhausted`, charged for what it produced.
 */
import { chargeMicros } from '../../lambdas/core/pricing';
import { countPromptTokens, tokenCounter } from '../../lambdas/core/token-count';
import { startStack, expectInvariant, type TestStack } from '../support/stack';
import { estimateOn, framesOf, modelOf, rawPost, rowOf, usageCommentOf } from '../support/e2e';

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => stack?.close());
beforeEach(() => stack.sim.reset());

const o200k = tokenCounter('o200k_base');
/** About 10 KB of English prose. */
const PROSE = 'The committee met on Tuesday to discuss the budget for the coming year, and agreed to postpone the decision. '.repeat(95);
const REPLY = 'Here is a short answer with a handful of ordinary English words in it.';

async function ratesOf(id: string): Promise<{ inputRateThousandths: number; cachedInputRateThousandths: number; outputRateThousandths: number }> {
  const m = await modelOf(stack, id);
  return { inputRateThousandths: m.inputRateThousandths!, cachedInputRateThousandths: m.cachedInputRateThousandths!, outputRateThousandths: m.outputRateThousandths! };
}

it('a non-streamed reply without usage: prompt and reply counted (not bytes), the output charged too, marked estimated', async () => {
  stack.sim.script('sim-small', [{ kind: 'ok', text: REPLY, omitUsage: true }]);
  const before = await stack.balance();
  const body = { model: 'local/sim-small', messages: [{ role: 'user', content: PROSE }] };
  const raw = JSON.stringify(body);
  const res = await rawPost(stack, '/chat/completions', raw);
  expect(res.status).toBe(200);
  const reply = JSON.parse(res.text) as { usage?: unknown; choices: { message: { content: string } }[] };
  expect(reply.usage).toBeUndefined();
  await stack.settled();
  const row = await rowOf(stack, res.headers.get('x-sluice-request-id'));
  const promptTokens = countPromptTokens(body, 'chat_completions', o200k);
  // A count: about a quarter of the bytes for English, where the old estimate took every byte.
  expect(promptTokens).toBeLessThan(Buffer.byteLength(raw) / 3);
  expect(promptTokens).toBeGreaterThan(Buffer.byteLength(raw) / 8);
  const outputTokens = o200k(reply.choices[0]!.message.content);
  expect(outputTokens).toBeGreaterThan(5);
  const expected = chargeMicros({ inputTokens: promptTokens, cachedInputTokens: 0, outputTokens, reasoningTokens: 0 }, await ratesOf('local/sim-small'));
  expect(row).toMatchObject({ inputTokens: promptTokens, outputTokens, chargeMicros: expected, estimated: true, outcome: 'ok' });
  expect(expected).toBeLessThan(row.holdMicros);
  const after = await stack.balance();
  expect(before.availableMicros - after.availableMicros).toBe(expected);
  expectInvariant(after);
});

it('a provider reporting usage is charged its counts, not marked estimated', async () => {
  const res = await rawPost(stack, '/chat/completions', JSON.stringify({ model: 'local/sim-small', messages: [{ role: 'user', content: 'hi' }] }));
  await stack.settled();
  const row = await rowOf(stack, res.headers.get('x-sluice-request-id'));
  expect(row.estimated).toBeUndefined();
});

it('a stream without usage: counted from what was relayed, marked estimated on the comment and the row', async () => {
  stack.sim.script('sim-small', [{ kind: 'ok', text: REPLY, omitUsage: true }]);
  const raw = JSON.stringify({ model: 'local/sim-small', messages: [{ role: 'user', content: PROSE }], stream: true });
  const res = await rawPost(stack, '/chat/completions', raw);
  const frames = framesOf(res.text);
  expect(res.text).toContain('data: [DONE]');
  const usage = usageCommentOf(frames.find((f) => f.startsWith(':x-sluice-usage')));
  await stack.settled();
  const row = await rowOf(stack, res.headers.get('x-sluice-request-id'));
  const expected = await estimateOn(stack, 'local/sim-small', raw, frames, row.holdMicros);
  expect(usage).toMatchObject({ estimated: true, charge_micros: expected, completion_tokens: o200k(REPLY) });
  expect(row).toMatchObject({ estimated: true, chargeMicros: expected, outputTokens: o200k(REPLY), outcome: 'ok' });
  expectInvariant(await stack.balance());
});

it('a stream that broke off: the prompt and the frames before the break, counted', async () => {
  stack.sim.script('sim-small', [{ kind: 'reset', afterChunks: 4, text: REPLY }]);
  const raw = JSON.stringify({ model: 'local/sim-small', messages: [{ role: 'user', content: PROSE }], stream: true });
  const res = await rawPost(stack, '/chat/completions', raw);
  const frames = framesOf(res.text);
  await stack.settled();
  const row = await rowOf(stack, res.headers.get('x-sluice-request-id'));
  const expected = await estimateOn(stack, 'local/sim-small', raw, frames, row.holdMicros);
  expect(row).toMatchObject({ outcome: 'upstream_fault', estimated: true, chargeMicros: expected });
  expect(row.outputTokens).toBeGreaterThan(0);
  expect(row.outputTokens).toBeLessThan(o200k(REPLY));
  expectInvariant(await stack.balance());
});

it('a stream cut by balance_exhausted is charged what it produced, less than everything it held', async () => {
  const poor = await stack.seed(1);
  // One token a frame, so the count of what it produced sits under what the hold covered.
  stack.sim.script('sim-large', [{ kind: 'ok', text: ' the'.repeat(3000).trim(), completionTokens: 3000, ignoreCeiling: true }]);
  const raw = JSON.stringify({ model: 'local/sim-large', messages: [{ role: 'user', content: PROSE.slice(0, 2000) }], max_tokens: 10, stream: true });
  const res = await rawPost(stack, '/chat/completions', raw, poor.rawKey);
  expect(res.text).toContain('"code":"balance_exhausted"');
  const frames = framesOf(res.text);
  await stack.settled(poor.workspaceId);
  const [row] = await stack.usageRows(poor.workspaceId);
  const expected = await estimateOn(stack, 'local/sim-large', raw, frames, row!.holdMicros);
  expect(row).toMatchObject({ outcome: 'balance_exhausted', estimated: true, chargeMicros: expected });
  expect(expected).toBeLessThan(row!.holdMicros);
  const b = await stack.balance(poor.workspaceId);
  expect(b.spentMicros).toBe(expected);
  expect(b.heldMicros).toBe(0);
  expectInvariant(b);
});

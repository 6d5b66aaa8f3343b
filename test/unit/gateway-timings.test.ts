/**
 * Issue 22 item 12: a usage row's `firstByteMs` and `durationMs` come from one clock and one
 * origin (the request's arrival at the gateway), so the first byte is never after the end. The
 * row once took its duration from the admission instead, and showed a first byte of 95 ms in a
 * request of 86. In-process on in-memory ports, with a clock the test drives.
 */
import type { Ending } from '../../lambdas/gateway/settle';
import { settle } from '../../lambdas/gateway/settle';
import type { GatewayDeps, RequestContext, Settlement } from '../../lambdas/gateway/ports';
import { CollectingSink, memoryGateway, MemoryLedger, RAW_KEY, type CannedReply } from '../support/memory-ports';

const auth = { authorization: `Bearer ${RAW_KEY}`, 'content-type': 'application/json' };
const usage = { prompt_tokens: 21, completion_tokens: 2, total_tokens: 23 };
const frame = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;

const replies: Record<'json' | 'stream', CannedReply> = {
  json: {
    status: 200,
    headers: { 'content-type': 'application/json' },
    chunks: [JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'sim-small', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }], usage })],
  },
  stream: {
    status: 200,
    headers: { 'content-type': 'text/event-stream' },
    chunks: [
      frame({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'sim-small', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] }),
      frame({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'sim-small', choices: [], usage }),
      'data: [DONE]\n\n',
    ],
  },
};

describe('a usage row times the request on one clock, from its arrival', () => {
  test.each(['json', 'stream'] as const)('%s: durationMs runs from arrival to settlement, and the first byte is within it', async (kind) => {
    // Every reading of the clock moves it on 7 ms, so each phase starts later than the one before.
    let t = 1_000_000;
    const readings: number[] = [];
    const mg = memoryGateway({ replies: () => replies[kind], clock: () => {
      t += 7;
      readings.push(t);
      return t;
    } });
    const first = readings.length; // the gateway's first reading of a request is its arrival
    const sink = await mg.serve({ headers: auth, json: { model: 'local/sim-small', messages: [{ role: 'user', content: 'Hi' }], stream: kind === 'stream' } }, new CollectingSink());
    expect(sink.status).toBe(200);
    const arrival = readings[first] as number;
    expect(mg.ledger.settlements).toHaveLength(1);
    const { hold, settlement } = mg.ledger.settlements[0] as { hold: { createdAt: number }; settlement: Settlement };
    // Admission is later than arrival: counting from it (as the row once did) is shorter.
    expect(hold.createdAt).toBeGreaterThan(arrival);
    expect(settlement.durationMs).toBe(settlement.now - arrival);
    expect(settlement.firstByteMs).toEqual(expect.any(Number));
    expect(settlement.firstByteMs).toBeGreaterThan(0);
    expect(settlement.firstByteMs).toBeLessThanOrEqual(settlement.durationMs ?? -1);
  });

  test('a clock that steps back between the first byte and the end still never puts the first byte after the end', async () => {
    const ledger = new MemoryLedger(1_000_000);
    const admitted = await ledger.admit({
      holdId: 'req_clock', workspaceId: 'ws_mem', keyId: 'key_mem', family: 'chat_completions', requestedModel: 'local/sim-small',
      amountMicros: 100, inputMicros: 10, byok: false, limits: { keyWindow: 'monthly', spendRateCapMicros: 1e12, keyRatePerMinute: 1e9 }, now: 1_010, expiresAt: 999_999,
    });
    if (!admitted.admitted) throw new Error('not admitted');
    // Arrival at 1000, first byte 95 ms later, and the clock reads 1086 at the end (stepped back).
    const ctx = { deps: { ledger, clock: () => 1_086 } as unknown as GatewayDeps, requestId: 'req_clock', traceId: 't', startedAt: 1_000, sink: new CollectingSink() } satisfies RequestContext;
    const ending: Ending = { hold: admitted.hold, counts: undefined, chargeMicros: 0, attempts: 1, status: 200, outcome: 'ok', stream: false, firstByteMs: 95 };
    await settle(ctx, ending);
    const s = ledger.settlements[0]?.settlement as Settlement;
    expect({ firstByteMs: s.firstByteMs, durationMs: s.durationMs }).toEqual({ firstByteMs: 95, durationMs: 95 });
  });
});

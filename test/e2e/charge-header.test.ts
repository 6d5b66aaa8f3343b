/**
 * Issue 22 item 21: a non-streamed reply carries its charge where a client can read it, in the
 * `x-sluice-charge` response header (micro-units, the unit of the stream's `:x-sluice-usage` line),
 * read here through the official `openai` client's `.withResponse()`. It is the charge the usage
 * row records and the balance pays; the body is the provider's, unchanged. A streamed reply has no
 * such header (its headers go before any count is known): its usage line carries the charge.
 * Each row also shows item 12's rule: the first byte is never after the end.
 */
import { chargeOn, chatCounts, framesOf, rawPost, responsesCounts, rowOf, usageCommentOf } from '../support/e2e';
import { expectInvariant, startStack, type TestStack } from '../support/stack';

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await stack?.close();
});

beforeEach(() => stack.sim.reset());

const messages = [{ role: 'user' as const, content: 'What is the charge of this request?' }];

/** The header as a whole number of micro-units. */
function chargeHeader(headers: Headers): number {
  const value = headers.get('x-sluice-charge');
  expect(value).toMatch(/^(0|[1-9]\d*)$/);
  return Number(value);
}

describe('x-sluice-charge on a non-streamed reply', () => {
  it('chat: the charge of the provider\'s counts, the usage row\'s charge and what the balance paid; the body the provider\'s own', async () => {
    const before = await stack.balance();
    const { data, response } = await stack.client().chat.completions.create({ model: 'local/sim-small', messages }).withResponse();
    const charge = chargeHeader(response.headers);
    if (data.usage === undefined) throw new Error('no usage in the reply');
    const expected = await chargeOn(stack, 'local/sim-small', chatCounts(data.usage));
    expect(expected).toBeGreaterThan(0);
    expect(charge).toBe(expected);
    await stack.settled();
    const row = await rowOf(stack, response.headers.get('x-sluice-request-id'));
    expect(row).toMatchObject({ chargeMicros: charge, stream: false, outcome: 'ok' });
    const after = await stack.balance();
    expect(before.availableMicros - after.availableMicros).toBe(charge);
    expectInvariant(after);
    expect(row.firstByteMs).toEqual(expect.any(Number));
    expect(row.firstByteMs).toBeLessThanOrEqual(row.durationMs);

    // The body is what the provider sent for the same request (ids and time aside), the model
    // echoed as sent (SPEC): nothing about the charge is added to it.
    const direct = (await (await fetch(`${stack.sim.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-small', messages }),
    })).json()) as Record<string, unknown>;
    const strip = (b: Record<string, unknown>): Record<string, unknown> => ({ ...b, id: '', created: 0 });
    expect(strip(data as unknown as Record<string, unknown>)).toEqual(strip({ ...direct, model: 'local/sim-small' }));
    expect(JSON.stringify(data)).not.toMatch(/charge/i);
  });

  it('responses: the same header, the charge of its counts', async () => {
    const { data, response } = await stack.client().responses.create({ model: 'local/sim-small', input: 'Hello there' }).withResponse();
    const charge = chargeHeader(response.headers);
    if (data.usage === undefined || data.usage === null) throw new Error('no usage in the reply');
    expect(charge).toBe(await chargeOn(stack, 'local/sim-small', responsesCounts(data.usage)));
    expect(charge).toBeGreaterThan(0);
    await stack.settled();
    const row = await rowOf(stack, response.headers.get('x-sluice-request-id'));
    expect(row).toMatchObject({ family: 'responses', chargeMicros: charge });
    expect(row.firstByteMs).toBeLessThanOrEqual(row.durationMs);
  });

  it('a reply with no usage: the header is the counted charge the row records as estimated', async () => {
    stack.sim.script('sim-small', [{ kind: 'ok', text: 'A reply whose provider reports no usage at all.', omitUsage: true }]);
    const { data, response } = await stack.client().chat.completions.create({ model: 'local/sim-small', messages }).withResponse();
    expect(data.usage).toBeUndefined();
    const charge = chargeHeader(response.headers);
    expect(charge).toBeGreaterThan(0);
    await stack.settled();
    expect(await rowOf(stack, response.headers.get('x-sluice-request-id'))).toMatchObject({ chargeMicros: charge, estimated: true });
  });

  it('a streamed reply has no header: its usage line carries the charge, as the row does', async () => {
    const { response } = await stack.client().chat.completions.create({ model: 'local/sim-small', messages, stream: true }).withResponse();
    expect(response.headers.get('x-sluice-charge')).toBeNull();
    const raw = await rawPost(stack, '/chat/completions', JSON.stringify({ model: 'local/sim-small', messages, stream: true }));
    expect(raw.headers.get('x-sluice-charge')).toBeNull();
    const usage = usageCommentOf(framesOf(raw.text).find((f) => f.startsWith(':x-sluice-usage')));
    await stack.settled();
    const row = await rowOf(stack, raw.headers.get('x-sluice-request-id'));
    expect(row).toMatchObject({ chargeMicros: usage.charge_micros, stream: true });
    expect(row.firstByteMs).toBeLessThanOrEqual(row.durationMs);
  });

  it('a refusal carries none (nothing is charged)', async () => {
    const res = await rawPost(stack, '/chat/completions', JSON.stringify({ model: 'local/sim-nope', messages }));
    expect(res.status).toBe(404);
    expect(res.headers.get('x-sluice-charge')).toBeNull();
  });
});

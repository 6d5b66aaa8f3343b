/**
 * The stage's `SettlementFailures` alarm counts the gateway's log lines that contain the term
 * `settle_failed` (a metric filter on its log group, `lib/alarms.ts`; `test/cdk/operations.test.ts`
 * pins the pattern). A failed settlement must write that term, or the alarm never fires: it had
 * stopped doing so when the gateway's faults moved to one line shape per phase.
 */
import { SETTLE_FAILED_EVENT } from '../../lambdas/gateway/faults';
import { memoryGateway, RAW_KEY } from '../support/memory-ports';

const completion = {
  status: 200,
  headers: { 'content-type': 'application/json' },
  chunks: [JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'sim-small', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 21, completion_tokens: 2, total_tokens: 23 } })],
};

/** Serves one chat request with the ledger failing at `fault`; returns the status and the error lines. */
async function serveWithFault(fault: 'settle' | 'admit', error: Error): Promise<{ status: number; lines: string[] }> {
  const lines: string[] = [];
  const spy = jest.spyOn(console, 'error').mockImplementation((line: unknown) => {
    lines.push(String(line));
  });
  try {
    const mg = memoryGateway({ replies: () => completion });
    mg.ledger.faults = { [fault]: error };
    const sink = await mg.serve({
      headers: { authorization: `Bearer ${RAW_KEY}`, 'content-type': 'application/json' },
      json: { model: 'local/sim-small', messages: [{ role: 'user', content: 'Hello' }] },
    });
    return { status: sink.status, lines };
  } finally {
    spy.mockRestore();
  }
}

it('writes the term the SettlementFailures alarm counts when a settlement fails, by kind only', async () => {
  const { status, lines } = await serveWithFault('settle', new TypeError('the prompt says: my password is hunter2'));
  expect(status).toBe(200);
  expect(SETTLE_FAILED_EVENT).toBe('settle_failed');
  const failed = lines.filter((l) => l.includes(`"${SETTLE_FAILED_EVENT}"`));
  expect(failed).toHaveLength(1);
  expect(JSON.parse(failed[0] as string)).toMatchObject({ level: 'error', phase: 'settle', event: 'settle_failed', fault: 'TypeError' });
  expect(lines.join('\n')).not.toContain('hunter2');
});

it('writes the term for nothing but a failed settlement', async () => {
  const { status, lines } = await serveWithFault('admit', new TypeError('boom'));
  expect(status).toBe(503);
  expect(lines.some((l) => l.includes('"phase":"admit"'))).toBe(true);
  expect(lines.join('\n')).not.toContain(SETTLE_FAILED_EVENT);
});

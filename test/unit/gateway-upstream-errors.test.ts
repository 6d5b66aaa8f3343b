/**
 * A provider that cannot be reached counts in its `UpstreamErrors` (issue 13): the per-provider
 * upstream-error-rate alarm (`lib/alarms.ts`) divides that metric by `UpstreamCalls`, so a
 * refused or reset connection, or a provider that never answers, must count as much as a 5xx.
 * In process, on in-memory ports, with the real EMF telemetry writing into an array.
 */
import { EmfTelemetry } from '../../lambdas/adapters/emf-telemetry';
import { memoryGateway, type CannedReply } from '../support/memory-ports';

const ask = { model: 'local/sim-small', messages: [{ role: 'user', content: 'Hello' }] };
const usage = { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 };
const ok: CannedReply = {
  status: 200,
  headers: { 'content-type': 'application/json' },
  chunks: [JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'sim-small', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }], usage })],
};
const errno = (code: string, message: string): Error => Object.assign(new Error(message), { code });

interface MetricLine {
  readonly Provider?: string;
  readonly UpstreamCalls?: number;
  readonly UpstreamErrors?: number;
  readonly upstreamStatus?: number;
  readonly _aws: { readonly CloudWatchMetrics: { readonly Dimensions: string[][]; readonly Metrics: { Name: string }[] }[] };
}

describe("an unreachable provider counts in its UpstreamErrors, as the error-rate alarm needs", () => {
  const rows: [string, CannedReply, Record<string, string>, number, number][] = [
    // SPEC: a provider the service cannot reach now is 404 model_not_available ("retry later").
    ['connection refused', { connectError: errno('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9') }, {}, 404, 1],
    ['connection reset before the status line', { connectError: errno('ECONNRESET', 'socket hang up') }, {}, 404, 1],
    ['no answer before the request limit', { hang: true }, { SLUICE_REQUEST_LIMIT_MS: '150' }, 504, 1],
    ['a 503 answer from the provider (the gateway answers 500)', { status: 503, headers: { 'content-type': 'application/json' }, chunks: ['{"error":{"message":"down"}}'] }, {}, 500, 1],
    ['a 200 answer', ok, {}, 200, 0],
  ];
  test.each(rows)('%s', async (_name, reply, env, status, errors) => {
    const lines: string[] = [];
    const mg = memoryGateway({ telemetry: new EmfTelemetry('test', (line) => lines.push(line)), replies: () => reply, env });
    const sink = await mg.serve({ json: ask });
    expect(sink.status).toBe(status);
    const metrics = lines.map((l) => JSON.parse(l) as MetricLine).filter((l) => l.Provider !== undefined);
    expect(metrics).toHaveLength(1);
    const line = metrics[0] as MetricLine;
    expect(line).toMatchObject({ Provider: 'local', UpstreamCalls: 1, UpstreamErrors: errors });
    // The metric is published by Stage and Provider: the dimensions the alarm reads.
    const directive = line._aws.CloudWatchMetrics.find((d) => d.Metrics.some((m) => m.Name === 'UpstreamErrors'));
    expect(directive?.Dimensions).toEqual([['Stage', 'Provider']]);
    expect(mg.ledger.invariantHolds()).toBe(true);
    expect(mg.ledger.heldMicros).toBe(0);
  });
});

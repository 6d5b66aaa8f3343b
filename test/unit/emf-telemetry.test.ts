/**
 * The EMF lines CloudWatch turns into metrics: each line's directives name only metrics and
 * dimensions present in it, upstream calls ride on their request's line, and no line carries
 * anything but metadata.
 */
import { EmfTelemetry } from '../../lambdas/adapters/emf-telemetry';

interface EmfLine {
  _aws: { Timestamp: number; CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string; Unit: string }[] }[] };
  [field: string]: unknown;
}

function capture(): { telemetry: EmfTelemetry; lines: EmfLine[] } {
  const lines: EmfLine[] = [];
  return { telemetry: new EmfTelemetry('prod', (line) => lines.push(JSON.parse(line) as EmfLine)), lines };
}

/** What CloudWatch requires of a line: every metric has a numeric value (or up to 100), every dimension a string. */
function expectValidEmf(line: EmfLine): void {
  expect(line._aws.CloudWatchMetrics.length).toBeGreaterThan(0);
  for (const directive of line._aws.CloudWatchMetrics) {
    expect(directive.Namespace).toBe('Sluice');
    for (const metric of directive.Metrics) {
      const value = line[metric.Name];
      if (Array.isArray(value)) {
        expect(value.length).toBeLessThanOrEqual(100);
        for (const v of value) expect(typeof v).toBe('number');
      } else {
        expect(typeof value).toBe('number');
      }
    }
    for (const set of directive.Dimensions) for (const name of set) expect(typeof line[name]).toBe('string');
  }
}

const REQUEST = { requestId: 'req_1', workspaceId: 'ws_1', keyId: 'key_1', model: 'openai/gpt-4.1-mini', status: 200, durationMs: 42, firstByteMs: 30, chargeMicros: 1234 };

it('writes one line for a request and its upstream call, with the upstream latency by provider', () => {
  const { telemetry, lines } = capture();
  telemetry.upstream({ requestId: 'req_1', provider: 'openai', status: 200, latencyMs: 25 });
  expect(lines).toHaveLength(0);
  telemetry.request(REQUEST);
  expect(lines).toHaveLength(1);
  const line = lines[0] as EmfLine;
  expectValidEmf(line);
  expect(line).toMatchObject({ Stage: 'prod', requestId: 'req_1', Provider: 'openai', upstreamStatus: 200, UpstreamLatencyMs: 25, Requests: 1, LatencyMs: 42, TimeToFirstByteMs: 30, SpendMicros: 1234 });
  expect(line._aws.CloudWatchMetrics.map((d) => d.Dimensions)).toEqual([[['Stage']], [['Stage', 'Provider']]]);
});

it('keeps retries to the same provider on the line as values, and gives another provider its own line', () => {
  const { telemetry, lines } = capture();
  telemetry.upstream({ requestId: 'req_2', provider: 'openai', status: 503, latencyMs: 10 });
  telemetry.upstream({ requestId: 'req_2', provider: 'anthropic', status: 200, latencyMs: 20 });
  telemetry.upstream({ requestId: 'req_2', provider: 'openai', status: 502, latencyMs: 11 });
  telemetry.upstream({ requestId: 'req_other', provider: 'openai', status: 200, latencyMs: 99 });
  telemetry.request({ ...REQUEST, requestId: 'req_2' });
  expect(lines).toHaveLength(2);
  for (const line of lines) expectValidEmf(line);
  const own = lines.find((l) => l.requestId === 'req_2' && l.event === undefined) as EmfLine;
  expect(own).toMatchObject({ Provider: 'openai', UpstreamLatencyMs: [10, 11], upstreamStatus: 502 });
  expect(lines.find((l) => l.event === 'upstream')).toMatchObject({ requestId: 'req_2', Provider: 'anthropic', UpstreamLatencyMs: 20, upstreamStatus: 200 });
  // another request's call waits for its own line
  telemetry.request({ ...REQUEST, requestId: 'req_other' });
  expect(lines[2]).toMatchObject({ requestId: 'req_other', UpstreamLatencyMs: 99 });
});

it('writes a refused request with its code as a dimension and no upstream directive', () => {
  const { telemetry, lines } = capture();
  telemetry.request({ requestId: 'req_3', status: 402, code: 'insufficient_credit', durationMs: 3 });
  const line = lines[0] as EmfLine;
  expectValidEmf(line);
  expect(line).toMatchObject({ Code: 'insufficient_credit', Refusals: 1 });
  expect(line._aws.CloudWatchMetrics).toHaveLength(1);
  expect(line._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['Stage'], ['Stage', 'Code']]);
  expect(line.Provider).toBeUndefined();
});

it('writes a count on a line of its own', () => {
  const { telemetry, lines } = capture();
  telemetry.count('TransactionConflicts', 2);
  expectValidEmf(lines[0] as EmfLine);
  expect(lines[0]).toMatchObject({ event: 'count', TransactionConflicts: 2 });
});

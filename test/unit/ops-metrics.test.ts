/**
 * The metrics the stage's alarms read and the code must emit: per-provider upstream calls and
 * errors on the gateway's EMF lines, and the sweeper's expired-holds backlog.
 */
import { EmfTelemetry } from '../../lambdas/adapters/emf-telemetry';
import { sweep, type SweepDeps } from '../../lambdas/sweeper/sweep';

type Line = Record<string, unknown> & { _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][]; Metrics: { Name: string }[] }[] } };

function metricsOf(line: Line, dims: string): string[] {
  return line._aws.CloudWatchMetrics.filter((d) => d.Dimensions.some((set) => set.join(',') === dims)).flatMap((d) => d.Metrics.map((m) => m.Name));
}

describe('upstream calls and errors, by provider', () => {
  const REQUEST = { requestId: 'req_1', status: 200, durationMs: 40 };
  test.each<[string, number[], number]>([
    ['one answer', [200], 0],
    ['a 5xx then an answer', [503, 200], 1],
    ['a provider refusal is not a provider fault', [400], 0],
    ['rate limited is not a fault', [429], 0],
    ['no answer at all', [0], 1],
    ['three 5xx', [500, 502, 504], 3],
  ])('%s', (_label, statuses, errors) => {
    const lines: Line[] = [];
    const telemetry = new EmfTelemetry('prod', (l) => lines.push(JSON.parse(l) as Line));
    for (const status of statuses) telemetry.upstream({ requestId: 'req_1', provider: 'openai', status, latencyMs: 5 });
    telemetry.request(REQUEST);
    expect(lines).toHaveLength(1);
    const line = lines[0] as Line;
    expect(line).toMatchObject({ Provider: 'openai', UpstreamCalls: statuses.length, UpstreamErrors: errors });
    expect(metricsOf(line, 'Stage,Provider')).toEqual(expect.arrayContaining(['UpstreamLatencyMs', 'UpstreamCalls', 'UpstreamErrors']));
  });

  test('a call to another provider is counted on its own line', () => {
    const lines: Line[] = [];
    const telemetry = new EmfTelemetry('prod', (l) => lines.push(JSON.parse(l) as Line));
    telemetry.upstream({ requestId: 'req_2', provider: 'openai', status: 502, latencyMs: 5 });
    telemetry.upstream({ requestId: 'req_2', provider: 'anthropic', status: 500, latencyMs: 7 });
    telemetry.request({ requestId: 'req_2', status: 503, code: 'model_not_available', durationMs: 20 });
    const other = lines.find((l) => l.event === 'upstream') as Line;
    expect(other).toMatchObject({ Provider: 'anthropic', UpstreamCalls: 1, UpstreamErrors: 1 });
    expect(metricsOf(other, 'Stage,Provider')).toEqual(expect.arrayContaining(['UpstreamCalls', 'UpstreamErrors']));
  });
});

describe('the sweeper reports its expired-holds backlog', () => {
  /** A document client that lists `expired` expired holds, none of which can be read back. */
  function deps(expired: number, lines: string[]): SweepDeps {
    const send = async (command: { input: Record<string, unknown> }): Promise<unknown> => {
      const input = command.input;
      if (input.Select === 'COUNT') return { Count: 0 };
      // The expiry index is sharded: the holds sit in one shard, the others are empty.
      if (input.IndexName !== undefined) {
        const shard = (input.ExpressionAttributeValues as Record<string, unknown> | undefined)?.[':shard'];
        return { Items: shard === 'X0' ? Array.from({ length: expired }, (_, i) => ({ holdId: `h${i}` })) : [] };
      }
      throw new Error('DynamoDB is down');
    };
    return {
      doc: { send } as unknown as SweepDeps['doc'],
      usageTable: 'U',
      ledger: { settle: async () => true },
      stage: 'prod',
      writeLine: (l) => lines.push(l),
    };
  }

  test.each([0, 3])('%i expired holds left open', async (expired) => {
    const lines: string[] = [];
    const result = await sweep(deps(expired, lines), Date.UTC(2026, 10, 23));
    expect(result.failed).toBe(expired);
    const emf = lines.map((l) => JSON.parse(l) as Line).find((l) => l.event === 'sweep') as Line;
    expect(emf).toMatchObject({ Stage: 'prod', ExpiredHoldsBacklog: expired });
    expect(metricsOf(emf, 'Stage')).toContain('ExpiredHoldsBacklog');
  });
});

/**
 * Telemetry as CloudWatch Embedded Metric Format: one JSON log line per request carries both the
 * structured log fields and the metrics (namespace `Sluice`, dimension `Stage`). Only metadata:
 * ids, model, status, code, timings, money; never a body or a key.
 */
import type { Telemetry } from '../gateway/ports';

type Fields = Readonly<Record<string, string | number | boolean | undefined>>;

export class EmfTelemetry implements Telemetry {
  constructor(
    private readonly stage: string,
    private readonly write: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
  ) {}

  request(fields: Fields): void {
    const status = typeof fields.status === 'number' ? fields.status : 0;
    const refused = status >= 400;
    const metrics: { Name: string; Unit: string }[] = [
      { Name: 'Requests', Unit: 'Count' },
      { Name: 'LatencyMs', Unit: 'Milliseconds' },
    ];
    const values: Record<string, number> = { Requests: 1, LatencyMs: Number(fields.durationMs ?? 0) };
    if (typeof fields.firstByteMs === 'number') {
      metrics.push({ Name: 'TimeToFirstByteMs', Unit: 'Milliseconds' });
      values.TimeToFirstByteMs = fields.firstByteMs;
    }
    if (typeof fields.chargeMicros === 'number') {
      metrics.push({ Name: 'SpendMicros', Unit: 'Count' });
      values.SpendMicros = fields.chargeMicros;
    }
    if (refused) {
      metrics.push({ Name: 'Refusals', Unit: 'Count' });
      values.Refusals = 1;
    }
    const dims = refused ? [['Stage'], ['Stage', 'Code']] : [['Stage']];
    this.emit({ ...fields, Code: refused ? String(fields.code ?? `http_${status}`) : undefined }, metrics, values, dims);
  }

  count(name: string, value: number): void {
    this.emit({ event: 'count' }, [{ Name: name, Unit: 'Count' }], { [name]: value }, [['Stage']]);
  }

  upstream(fields: { readonly provider: string; readonly status: number; readonly latencyMs: number }): void {
    this.emit(
      { event: 'upstream', Provider: fields.provider, upstreamStatus: fields.status },
      [{ Name: 'UpstreamLatencyMs', Unit: 'Milliseconds' }],
      { UpstreamLatencyMs: fields.latencyMs },
      [['Stage', 'Provider']],
    );
  }

  private emit(fields: Fields, metrics: { Name: string; Unit: string }[], values: Record<string, number>, dimensions: string[][]): void {
    const line = {
      _aws: { Timestamp: Date.now(), CloudWatchMetrics: [{ Namespace: 'Sluice', Dimensions: dimensions, Metrics: metrics }] },
      Stage: this.stage,
      ...fields,
      ...values,
    };
    this.write(JSON.stringify(line));
  }
}

/** Telemetry that records nothing (tests, benchmarks). */
export const silentTelemetry: Telemetry = { request: () => undefined, upstream: () => undefined, count: () => undefined };

/**
 * Local mode's telemetry: one short human line per request on stderr (status, model, timings,
 * charge), the same metadata the EMF line carries and nothing more.
 */
export class ConsoleTelemetry implements Telemetry {
  constructor(private readonly write: (line: string) => void = (line) => process.stderr.write(`${line}\n`)) {}

  request(fields: Fields): void {
    const parts = [
      `[gateway] ${String(fields.status ?? '-')}`,
      fields.code ? String(fields.code) : undefined,
      fields.model ? String(fields.model) : undefined,
      fields.servedBy && fields.servedBy !== fields.model ? `served by ${String(fields.servedBy)}` : undefined,
      `${String(fields.durationMs ?? 0)} ms`,
      typeof fields.firstByteMs === 'number' ? `first byte ${fields.firstByteMs} ms` : undefined,
      typeof fields.chargeMicros === 'number' ? `charged ${fields.chargeMicros} µ` : undefined,
      String(fields.requestId ?? ''),
    ];
    this.write(parts.filter((p) => p !== undefined).join('  '));
  }
}

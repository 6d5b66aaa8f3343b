/**
 * Telemetry as CloudWatch Embedded Metric Format: one JSON log line per request carries both the
 * structured log fields and the metrics (namespace `Sluice`, dimension `Stage`). Only metadata:
 * ids, model, status, code, timings, money; never a body or a key.
 *
 * A request's upstream calls ride on its own line (a second metric directive, by `Stage` and
 * `Provider`) rather than a line each: a log line is a write to the runtime's log pipe, which
 * costs more CPU than anything else the telemetry does. Calls to a provider other than the
 * first one (a fallback across providers) get a line of their own.
 */
import type { Telemetry } from '../gateway/ports';
import { EMF_NAMESPACE as NAMESPACE, emfLine, type MetricDirective as Directive } from '../shared/emf';

type Fields = Readonly<Record<string, string | number | boolean | undefined>>;
type UpstreamCall = Parameters<NonNullable<Telemetry['upstream']>>[0];
/** Per provider: latency, and calls and errors for the upstream error-rate alarm. */
const UPSTREAM_METRICS = [
  { Name: 'UpstreamLatencyMs', Unit: 'Milliseconds' },
  { Name: 'UpstreamCalls', Unit: 'Count' },
  { Name: 'UpstreamErrors', Unit: 'Count' },
];

/** A provider's fault rather than an answer: a 5xx, or no status at all (0, the connection failed). */
function upstreamError(status: number): number {
  return status === 0 || status >= 500 ? 1 : 0;
}
/** EMF takes at most 100 values for one metric in one line. */
const MAX_VALUES = 100;

export class EmfTelemetry implements Telemetry {
  /** Upstream calls waiting for their request's line, by request id. */
  private readonly pending = new Map<string, UpstreamCall[]>();

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
    const values: Record<string, number | number[]> = { Requests: 1, LatencyMs: Number(fields.durationMs ?? 0) };
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
    const directives: Directive[] = [{ Namespace: NAMESPACE, Dimensions: refused ? [['Stage'], ['Stage', 'Code']] : [['Stage']], Metrics: metrics }];
    const extra: Record<string, string | number | undefined> = { Code: refused ? String(fields.code ?? `http_${status}`) : undefined };

    const requestId = typeof fields.requestId === 'string' ? fields.requestId : undefined;
    const calls = requestId === undefined ? undefined : this.pending.get(requestId);
    if (requestId !== undefined) this.pending.delete(requestId);
    if (calls !== undefined && calls.length > 0) {
      const provider = (calls[0] as UpstreamCall).provider;
      const own = calls.filter((c) => c.provider === provider).slice(-MAX_VALUES);
      directives.push({ Namespace: NAMESPACE, Dimensions: [['Stage', 'Provider']], Metrics: UPSTREAM_METRICS });
      extra.Provider = provider;
      extra.upstreamStatus = (own[own.length - 1] as UpstreamCall).status;
      values.UpstreamLatencyMs = own.length === 1 ? (own[0] as UpstreamCall).latencyMs : own.map((c) => c.latencyMs);
      values.UpstreamCalls = own.length;
      values.UpstreamErrors = own.reduce((n, c) => n + upstreamError(c.status), 0);
      for (const other of calls.filter((c) => c.provider !== provider)) this.upstreamLine(other);
    }
    this.emit({ ...fields, ...extra }, directives, values);
  }

  count(name: string, value: number): void {
    this.emit({ event: 'count' }, [{ Namespace: NAMESPACE, Dimensions: [['Stage']], Metrics: [{ Name: name, Unit: 'Count' }] }], { [name]: value });
  }

  upstream(call: UpstreamCall): void {
    if (call.requestId === undefined) {
      this.upstreamLine(call);
      return;
    }
    const calls = this.pending.get(call.requestId);
    if (calls === undefined) this.pending.set(call.requestId, [call]);
    else calls.push(call);
  }

  private upstreamLine(call: UpstreamCall): void {
    this.emit(
      { event: 'upstream', requestId: call.requestId, Provider: call.provider, upstreamStatus: call.status },
      [{ Namespace: NAMESPACE, Dimensions: [['Stage', 'Provider']], Metrics: UPSTREAM_METRICS }],
      { UpstreamLatencyMs: call.latencyMs, UpstreamCalls: 1, UpstreamErrors: upstreamError(call.status) },
    );
  }

  private emit(fields: Fields, directives: Directive[], values: Record<string, number | number[]>): void {
    this.write(emfLine(Date.now(), directives, { Stage: this.stage, ...fields, ...values }));
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

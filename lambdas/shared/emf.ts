/**
 * CloudWatch Embedded Metric Format, the one line shape every Sluice function logs its metrics in:
 * a JSON object whose `_aws` member names the metrics (namespace `Sluice`) and their dimensions,
 * beside the fields logged with them. The gateway's telemetry, the sweeper and the low-credit
 * notifier all write through here. Only metadata goes in: never a body, a prompt or a key.
 */

/** The namespace of every Sluice metric (the dashboards and alarms read it). */
export const EMF_NAMESPACE = 'Sluice';

/** One metric directive: the metrics a line carries under a set of dimension sets. */
export interface MetricDirective {
  readonly Namespace: string;
  readonly Dimensions: string[][];
  readonly Metrics: { Name: string; Unit: string }[];
}

/** A line: the directives, then `body` (the dimension values, the fields and the metric values). */
export function emfLine(timestamp: number, directives: readonly MetricDirective[], body: Readonly<Record<string, unknown>>): string {
  return JSON.stringify({ _aws: { Timestamp: timestamp, CloudWatchMetrics: directives }, ...body });
}

/**
 * A line of counts by `Stage`: each member of `counts` is a metric (unit Count) and is logged with
 * its value, after the `fields` (an `event` name and whatever else explains the counts).
 */
export function stageCountsLine(stage: string, timestamp: number, fields: Readonly<Record<string, unknown>>, counts: Readonly<Record<string, number>>): string {
  const metrics = Object.keys(counts).map((Name) => ({ Name, Unit: 'Count' }));
  return emfLine(timestamp, [{ Namespace: EMF_NAMESPACE, Dimensions: [['Stage']], Metrics: metrics }], { Stage: stage, ...fields, ...counts });
}

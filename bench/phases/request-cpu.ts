/** Phase 2: CPU per non-streamed request, one at a time (a Lambda instance serves one at a time). */
import type { Plan } from '../args';
import { post, type Target } from '../load';
import type { GatewayProcess } from '../processes';
import { log, type Stack } from '../stack';
import { cpuUs, expectOk } from './requests';

export interface RequestCpu {
  /** The gateway's CPU per request, and the kernel's part of it. Microseconds. */
  readonly perRequestUs: number;
  readonly perRequestSystemUs: number;
  /** The bare relay's CPU per request. */
  readonly relayPerRequestUs: number;
}

/** `n` sequential requests to one side; its CPU (user + system, and system alone) per request, microseconds. */
export async function sequentialCpu(proc: GatewayProcess, t: Target, n: number, body: Buffer, headers: Record<string, string>): Promise<{ totalUs: number; systemUs: number }> {
  const a = await proc.idle();
  for (let i = 0; i < n; i += 1) expectOk(await post(t, body, headers), t.name);
  const b = await proc.idle();
  return { totalUs: cpuUs(a, b) / n, systemUs: (b.cpuSystemUs - a.cpuSystemUs) / n };
}

/** Runs phase 2: `plan.cpuRequests` sequential requests to the gateway, then to the bare relay. */
export async function requestCpu(stack: Stack, plan: Plan): Promise<RequestCpu> {
  const { short, firstKey, directKey } = stack.requests;
  log(`CPU per request (${plan.cpuRequests} sequential requests to the gateway, then to the bare relay)`);
  const gwCpu = await sequentialCpu(stack.gw, stack.gwT, plan.cpuRequests, short.gateway, firstKey);
  const relayCpu = await sequentialCpu(stack.relay, stack.relayT, plan.cpuRequests, short.direct, directKey);
  return { perRequestUs: gwCpu.totalUs, perRequestSystemUs: gwCpu.systemUs, relayPerRequestUs: relayCpu.totalUs };
}

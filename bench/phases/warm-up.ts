/** Warm-up: every side, the floor's transaction and a few streams, before anything is measured. */
import type { Plan } from '../args';
import { closedLoop, post, postStream } from '../load';
import { log, type Stack } from '../stack';
import { authHeaders, expectOk, type Caller } from './requests';

/** Sends every side some load, the floor 100 unkept transactions and 20 streams per side; ends with the gateway idle. */
export async function warmUp(stack: Stack, plan: Plan): Promise<void> {
  log('warm-up');
  await warmGateway(stack, plan);
  await warmControls(stack, plan);
}

/** The rest of {@link warmUp}: the direct and bare relay sides, and the floor's transaction. */
export async function warmControls(stack: Stack, plan: Plan): Promise<void> {
  const { directT, relayT, floor } = stack;
  const { short, shortStream, directKey, bodyFor, keyFor } = stack.requests;
  await closedLoop(8, plan.warmupMs / 2, () => post(directT, short.direct, directKey));
  await closedLoop(8, plan.warmupMs / 2, () => post(relayT, short.direct, directKey));
  for (let i = 0; i < 100; i += 1) await floor.transaction(false);
  for (let i = 0; i < 20; i += 1) {
    for (const t of [directT, relayT]) expectOk(await postStream(t, bodyFor(t, shortStream), keyFor(t)), `warm-up stream (${t.name})`);
  }
}

/** The gateway's part of {@link warmUp} alone (a gateway started later, `Stack.startGateway`): its load and 20 streams; ends with it idle. */
export async function warmGateway(stack: Pick<Stack, 'gw' | 'gwT' | 'callers' | 'requests'>, plan: Plan): Promise<void> {
  const { gwT, callers, gw } = stack;
  const { short, shortStream, bodyFor, keyFor } = stack.requests;
  await closedLoop(8, plan.warmupMs, (w) => post(gwT, short.gateway, authHeaders((callers[w % callers.length] as Caller).rawKey)));
  for (let i = 0; i < 20; i += 1) expectOk(await postStream(gwT, bodyFor(gwT, shortStream), keyFor(gwT)), 'warm-up stream (gateway)');
  await gw.idle();
}

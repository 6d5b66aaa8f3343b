/** Warm-up: every side, the floor's transaction and a few streams, before anything is measured. */
import type { Plan } from '../args';
import { closedLoop, post, postStream } from '../load';
import { log, type Stack } from '../stack';
import { authHeaders, expectOk, type Caller } from './requests';

/** Sends every side some load, the floor 100 unkept transactions and 20 streams per side; ends with the gateway idle. */
export async function warmUp(stack: Stack, plan: Plan): Promise<void> {
  const { gwT, directT, relayT, callers, floor, gw } = stack;
  const { short, shortStream, directKey, bodyFor, keyFor } = stack.requests;
  log('warm-up');
  await closedLoop(8, plan.warmupMs, (w) => post(gwT, short.gateway, authHeaders((callers[w % callers.length] as Caller).rawKey)));
  await closedLoop(8, plan.warmupMs / 2, () => post(directT, short.direct, directKey));
  await closedLoop(8, plan.warmupMs / 2, () => post(relayT, short.direct, directKey));
  for (let i = 0; i < 100; i += 1) await floor.transaction(false);
  for (let i = 0; i < 20; i += 1) {
    for (const t of [gwT, directT, relayT]) expectOk(await postStream(t, bodyFor(t, shortStream), keyFor(t)), `warm-up stream (${t.name})`);
  }
  await gw.idle();
}

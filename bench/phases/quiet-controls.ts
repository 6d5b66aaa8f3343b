/**
 * After the stack has stopped, on a quieter machine: the gateway's CPU profile (with
 * `--profile`), an idle wake-up, Sluice's own code with its ports in memory (`../own-cpu.ts`),
 * and the bundled handler's module init in fresh processes.
 */
import { copyFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Options, Plan } from '../args';
import { measureModuleInit, type InitResult } from '../bundle';
import { measureOwnCpu, type OwnCpu } from '../own-cpu';
import { summarizeProfile, type ProfileSummary } from '../profile-summary';
import { log, type Stack } from '../stack';

export interface QuietControls {
  readonly profile: ProfileSummary | undefined;
  readonly wakeupUs: number;
  readonly own: OwnCpu;
  readonly init: InitResult;
}

/** CPU this process is charged per `ms`-millisecond sleep with no work: what a wake-up costs here. */
async function idleWakeupCpuUs(n: number, ms: number): Promise<number> {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i += 1) await new Promise((resolve) => setTimeout(resolve, ms));
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

/** Runs the controls that need the stack stopped; `stack.stopServices()` must have run. */
export async function quietControls(stack: Stack, plan: Plan, options: Options): Promise<QuietControls> {
  const { bundles, profileDir } = stack;
  let profile: ProfileSummary | undefined;
  if (options.profile) {
    // Keep the bundle beside its profile, so the profile can be read again later.
    copyFileSync(bundles.gatewayServer, path.join(profileDir, 'gateway-server.js'));
    const newest = readdirSync(profileDir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => path.join(profileDir, f))
      .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
    if (newest !== undefined) profile = summarizeProfile(newest, bundles.gatewayServer);
  }
  log("controls on the quiet machine: an idle wake-up; Sluice's own code with its ports in memory");
  const wakeupUs = await idleWakeupCpuUs(plan.wakeups, 2);
  const own = await measureOwnCpu(plan.ownRequests);

  log('module init of the bundled handler in fresh processes');
  const init = await measureModuleInit(bundles, plan.initRuns);
  return { profile, wakeupUs, own, init };
}

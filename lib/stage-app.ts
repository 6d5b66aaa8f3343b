import type { App } from 'aws-cdk-lib';
import { FrontDoorStack } from './front-door';
import type { ProviderKeySource } from './provider-file';
import { SluiceStack } from './sluice-stack';
import { FRONT_DOOR_REGION, isMultiRegion, type StageSettings } from './stage';

/** The stacks of one stage. */
export interface StageStacks {
  /** One stack per region, home first; a one-region stage's only stack, `Sluice-<stage>`, is the one element. */
  readonly regions: readonly SluiceStack[];
  /** The front door's stack, `Sluice-<stage>-front-door` (two regions or more). */
  readonly frontDoor?: FrontDoorStack;
}

/** Options of {@link addStage}. */
export interface AddStageOptions {
  /** Provider accounts; defaults to `config/providers.json`. */
  readonly providers?: readonly ProviderKeySource[];
}

/**
 * Adds a stage's stacks to the app. One region: today's environment-agnostic `Sluice-<stage>`,
 * unchanged. Two or more (docs/regions.md, "Deploying"): `Sluice-<stage>-<region>` per region,
 * each pinned to its region (no account: synth stays offline, the account is the deploying
 * credentials'), the home first (it defines the global tables and the secrets' replicas, so the
 * others depend on it), then `Sluice-<stage>-front-door` in us-east-1, which reads every region's
 * gateway URL through CDK's cross-region references.
 */
export function addStage(app: App, stage: StageSettings, options: AddStageOptions = {}): StageStacks {
  const providers = options.providers;
  if (!isMultiRegion(stage)) {
    return { regions: [new SluiceStack(app, `Sluice-${stage.name}`, { stage, providers })] };
  }
  const regions = stage.regions.map(
    (region) =>
      new SluiceStack(app, `Sluice-${stage.name}-${region}`, {
        stage,
        providers,
        region,
        env: { region },
        crossRegionReferences: true,
      }),
  );
  const [home, ...others] = regions;
  if (home === undefined) throw new Error('addStage: no regions');
  for (const stack of others) stack.addStackDependency(home, 'the home stack makes the global tables\' replicas and the secrets\' replicas this region reads');
  const frontDoor = new FrontDoorStack(app, `Sluice-${stage.name}-front-door`, {
    stage,
    gateways: regions.map((s, i) => ({ region: stage.regions[i] ?? '', url: s.gateway.url })),
    env: { region: FRONT_DOOR_REGION },
    crossRegionReferences: true,
  });
  for (const stack of regions) frontDoor.addStackDependency(stack, 'the front door routes to every region\'s gateway');
  return { regions, frontDoor };
}

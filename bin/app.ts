/**
 * The CDK app: a stage chosen with `-c stage=dev|stg|prod` (default `dev`); `-c alarmEmail=<address>`
 * subscribes an address to the stage's alarm topic; `-c consoleOrigin=https://<host>` names the
 * console's own domain when one fronts its URL; `-c compute=managed-instances` runs the gateway on
 * Lambda Managed Instances (default on-demand); `-c regions=us-east-1,us-west-2` spreads the stage
 * over those regions, the first its home (docs/regions.md). One region: one environment-agnostic
 * stack, `Sluice-<stage>`. Several: `Sluice-<stage>-<region>` each and `Sluice-<stage>-front-door`
 * (lib/stage-app.ts). No account or region lookups either way, so `cdk synth` runs offline.
 */
import { App } from 'aws-cdk-lib';
import { applyNag } from '../lib/nag';
import { addStage } from '../lib/stage-app';
import { StageConfigError, stageSettings } from '../lib/stage';

/** `-c regions=a,b` arrives as a string; a list in cdk.json's context is taken too. */
function regionsContext(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value.join(',');
  throw new StageConfigError(`-c regions must be region names separated by commas, e.g. us-east-1,us-west-2; got ${JSON.stringify(value)}`);
}

const app = new App();
const requested: unknown = app.node.tryGetContext('stage');
const alarmEmail: unknown = app.node.tryGetContext('alarmEmail');
const consoleOrigin: unknown = app.node.tryGetContext('consoleOrigin');
const compute: unknown = app.node.tryGetContext('compute');
const regions: unknown = app.node.tryGetContext('regions');
const stage = stageSettings(requested, {
  alarmEmail: typeof alarmEmail === 'string' ? alarmEmail : undefined,
  consoleOrigin: typeof consoleOrigin === 'string' ? consoleOrigin : undefined,
  compute: typeof compute === 'string' ? compute : undefined,
  regions: regionsContext(regions),
});
if (stage.alarmEmail === undefined) {
  process.stderr.write(`Sluice-${stage.name}: no -c alarmEmail=...; alarms and low-credit notices go to the SNS topic with no subscriber\n`);
}
addStage(app, stage);
// cdk-nag's AwsSolutions and Serverless packs: an unacknowledged finding fails the synth.
applyNag(app);
app.synth();

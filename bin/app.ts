/**
 * The CDK app: one stack per stage, `Sluice-<stage>`, chosen with `-c stage=dev|stg|prod`
 * (default `dev`); `-c alarmEmail=<address>` subscribes an address to the stage's alarm topic;
 * `-c consoleOrigin=https://<host>` names the console's own domain when one fronts its URL;
 * `-c compute=managed-instances` runs the gateway on Lambda Managed Instances (default on-demand). The
 * stack is environment-agnostic (no account or region lookups), so `cdk synth` runs offline.
 */
import { App } from 'aws-cdk-lib';
import { applyNag } from '../lib/nag';
import { SluiceStack } from '../lib/sluice-stack';
import { stageSettings } from '../lib/stage';

const app = new App();
const requested: unknown = app.node.tryGetContext('stage');
const alarmEmail: unknown = app.node.tryGetContext('alarmEmail');
const consoleOrigin: unknown = app.node.tryGetContext('consoleOrigin');
const compute: unknown = app.node.tryGetContext('compute');
const stage = stageSettings(requested, {
  alarmEmail: typeof alarmEmail === 'string' ? alarmEmail : undefined,
  consoleOrigin: typeof consoleOrigin === 'string' ? consoleOrigin : undefined,
  compute: typeof compute === 'string' ? compute : undefined,
});
if (stage.alarmEmail === undefined) {
  process.stderr.write(`Sluice-${stage.name}: no -c alarmEmail=...; alarms and low-credit notices go to the SNS topic with no subscriber\n`);
}
new SluiceStack(app, `Sluice-${stage.name}`, { stage });
// cdk-nag's AwsSolutions and Serverless packs: an unacknowledged finding fails the synth.
applyNag(app);
app.synth();

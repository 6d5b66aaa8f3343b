/**
 * The CDK app: one stack per stage, `Sluice-<stage>`, chosen with `-c stage=dev|stg|prod`
 * (default `dev`). The stack is environment-agnostic (no account or region lookups), so
 * `cdk synth` runs offline.
 */
import { App } from 'aws-cdk-lib';
import { SluiceStack } from '../lib/sluice-stack';
import { stageSettings } from '../lib/stage';

const app = new App();
const requested: unknown = app.node.tryGetContext('stage');
const stage = stageSettings(requested);
new SluiceStack(app, `Sluice-${stage.name}`, { stage });
app.synth();

import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { RemovalPolicy } from 'aws-cdk-lib';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import {
  GATEWAY_TIMEOUT,
  REQUEST_LIMIT,
  STAGE_NAMES,
  StageConfigError,
  stageSettings,
  validateStageSettings,
  type StageSettings,
} from '../../lib/stage';
import { scratchDirs } from '../support/scratch';

/** The synth that is refused gets an output folder of its own, removed when the file ends. */
const scratch = scratchDirs();

const ROOT = path.resolve(__dirname, '..', '..');

describe('stage settings', () => {
  it('defaults to dev when no stage is given', () => {
    expect(stageSettings(undefined).name).toBe('dev');
  });

  it.each(['qa', 'production', 'local', '', 'DEV'])('refuses the unknown stage %j', (name) => {
    expect(() => stageSettings(name)).toThrow(StageConfigError);
    expect(() => stageSettings(name)).toThrow(/unknown stage .*-c stage=dev\|stg\|prod/);
  });

  it('refuses a stage that is not a string', () => {
    expect(() => stageSettings(3)).toThrow(StageConfigError);
  });

  it.each(STAGE_NAMES)('derives the %s names from the stage', (name) => {
    const s = stageSettings(name);
    expect(s.tablePrefix).toBe(`sluice-${name}-`);
    expect(s.byokSecretPrefix).toBe(`sluice/${name}/byok/`);
    expect(Object.isFrozen(s)).toBe(true);
  });

  it('retains and protects prod, and only prod', () => {
    expect(stageSettings('prod')).toMatchObject({ removalPolicy: RemovalPolicy.RETAIN, deletionProtection: true });
    expect(stageSettings('dev')).toMatchObject({ removalPolicy: RemovalPolicy.DESTROY, deletionProtection: false });
  });

  it('gives the gateway a timeout above the request limit', () => {
    expect(GATEWAY_TIMEOUT.toSeconds()).toBeGreaterThan(REQUEST_LIMIT.toSeconds());
    expect(REQUEST_LIMIT.toSeconds()).toBe(540);
  });

  const dev = stageSettings('dev');
  const bad: ReadonlyArray<[string, StageSettings]> = [
    ['a zero key rate', { ...dev, keyRatePerMinute: 0 }],
    ['a fractional key rate', { ...dev, keyRatePerMinute: 1.5 }],
    ['a NaN key rate', { ...dev, keyRatePerMinute: Number.NaN }],
    ['gateway memory below Lambda minimum', { ...dev, gatewayMemoryMb: 64 }],
    ['worker memory above Lambda maximum', { ...dev, workerMemoryMb: 20_000 }],
    ['a negative hold grace', { ...dev, holdGraceMs: -1 }],
    ['infinite log retention', { ...dev, logRetention: RetentionDays.INFINITE }],
    ['a log retention CloudWatch does not offer', { ...dev, logRetention: 2 as RetentionDays }],
    ['an iterator-age alarm beyond stream retention', { ...dev, alarms: { ...dev.alarms, aggregatorIteratorAgeMs: 25 * 3_600_000 } }],
    ['a zero dead-letter threshold', { ...dev, alarms: { ...dev.alarms, deadLetterMessages: 0 } }],
    ['a table prefix of another stage', { ...dev, tablePrefix: 'sluice-prod-' }],
    ['an unprotected prod', { ...stageSettings('prod'), deletionProtection: false }],
    ['a prod that destroys its data', { ...stageSettings('prod'), removalPolicy: RemovalPolicy.DESTROY }],
  ];
  it.each(bad)('rejects %s', (_label, settings) => {
    expect(() => validateStageSettings(settings)).toThrow(StageConfigError);
  });

  it('accepts every shipped stage', () => {
    for (const name of STAGE_NAMES) expect(() => validateStageSettings(stageSettings(name))).not.toThrow();
  });
});

describe('bin/app.ts', () => {
  it('fails to synthesize an unknown stage, naming the valid ones', async () => {
    const run = promisify(execFile);
    const tsx = path.join(ROOT, 'node_modules', '.bin', 'tsx');
    await expect(
      run(tsx, [path.join(ROOT, 'bin', 'app.ts')], {
        cwd: ROOT,
        env: { ...process.env, CDK_CONTEXT_JSON: JSON.stringify({ stage: 'qa' }), CDK_OUTDIR: scratch('sluice-unknown-stage-') },
      }),
    ).rejects.toMatchObject({ stderr: expect.stringMatching(/unknown stage "qa"/) });
  });
});

/**
 * A stage's regions (lib/stage.ts, `-c regions=`): parsing and validation, and that a stage with
 * one region synthesizes exactly the stack main did before regions existed (the same resources,
 * logical ids and types as test/fixtures/one-region-resources.json, recorded from main's lib/ with
 * the same providers), with nothing multi-region in it, and cdk-nag clean.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Template } from 'aws-cdk-lib/assertions';
import { REGION_ENV } from '../../lambdas/shared/region-env';
import { nagPacks } from '../../lib/nag';
import type { ProviderKeySource } from '../../lib/provider-file';
import { addStage } from '../../lib/stage-app';
import { MAX_REGIONS, StageConfigError, isMultiRegion, parseRegions, stageSettings, validateStageSettings, type StageName } from '../../lib/stage';
import { cdkApps, NO_BUNDLING } from '../support/cdk-app';

const newApp = cdkApps();

const ROOT = path.resolve(__dirname, '..', '..');
// The providers the fixture was recorded with.
const PROVIDERS: readonly ProviderKeySource[] = [
  { name: 'openai', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } },
  { name: 'local', keySource: 'none' },
];

describe('-c regions=', () => {
  it('parses names separated by commas, home first, spaces ignored', () => {
    expect(parseRegions('us-east-1,us-west-2')).toEqual(['us-east-1', 'us-west-2']);
    expect(parseRegions(' eu-west-1 , eu-central-2,ap-southeast-4 ')).toEqual(['eu-west-1', 'eu-central-2', 'ap-southeast-4']);
    expect(parseRegions('us-gov-west-1,us-gov-east-1')).toEqual(['us-gov-west-1', 'us-gov-east-1']);
  });

  it('means the stage\'s own list when absent or empty', () => {
    expect(parseRegions(undefined)).toBeUndefined();
    expect(parseRegions('')).toBeUndefined();
    expect(parseRegions('  ')).toBeUndefined();
    expect(stageSettings('prod', { regions: '' }).regions).toEqual([]);
    expect(stageSettings('prod').regions).toEqual([]);
  });

  it.each([
    ['an empty entry', 'us-east-1,,us-west-2', /an empty region name; separate region names with single commas/],
    ['a trailing comma', 'us-east-1,', /an empty region name/],
    ['a typo', 'us-east1,us-west-2', /"us-east1" is not an AWS region name \(lower case, like us-east-1/],
    ['upper case', 'US-EAST-1,us-west-2', /"US-EAST-1" is not an AWS region name/],
    ['a zone instead of a region', 'us-east-1a,us-west-2', /"us-east-1a" is not an AWS region name/],
    ['a made-up direction', 'us-up-1,us-west-2', /"us-up-1" is not an AWS region name/],
    ['semicolons', 'us-east-1;us-west-2', /"us-east-1;us-west-2" is not an AWS region name/],
    ['a region twice', 'us-east-1,us-west-2,us-east-1', /region us-east-1 is listed twice/],
  ])('refuses %s, naming the entry', (_label, raw, message) => {
    expect(() => parseRegions(raw)).toThrow(StageConfigError);
    expect(() => parseRegions(raw)).toThrow(message);
    expect(() => stageSettings('dev', { regions: raw })).toThrow(new RegExp(`-c regions=${raw.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `));
  });

  it(`refuses more than ${MAX_REGIONS} regions (CloudFront origins per distribution)`, () => {
    const many = Array.from({ length: MAX_REGIONS + 1 }, (_, i) => `eu-west-${i + 1}`).join(',');
    expect(() => parseRegions(many)).toThrow(/at most 25 regions/);
  });

  it('puts the regions on the stage, frozen, and validates a stage\'s own list too', () => {
    const s = stageSettings('stg', { regions: 'us-east-1,us-west-2' });
    expect(s.regions).toEqual(['us-east-1', 'us-west-2']);
    expect(Object.isFrozen(s.regions)).toBe(true);
    expect(isMultiRegion(s)).toBe(true);
    expect(isMultiRegion(stageSettings('stg', { regions: 'us-east-1' }))).toBe(false);
    expect(() => validateStageSettings({ ...stageSettings('dev'), regions: ['us-east-1', 'nowhere'] })).toThrow(/dev\.regions: "nowhere" is not an AWS region name/);
  });

  it('makes bin/app.ts fail before synthesizing anything, with the message', async () => {
    const run = promisify(execFile);
    const tsx = path.join(ROOT, 'node_modules', '.bin', 'tsx');
    await expect(
      run(tsx, [path.join(ROOT, 'bin', 'app.ts')], {
        cwd: ROOT,
        env: { ...process.env, CDK_CONTEXT_JSON: JSON.stringify({ stage: 'dev', regions: 'us-east-1,us-wset-2' }) },
      }),
    ).rejects.toMatchObject({ stderr: expect.stringMatching(/"us-wset-2" is not an AWS region name/) });
  });
});

describe('a stage with one region', () => {
  const recorded = JSON.parse(readFileSync(path.join(ROOT, 'test', 'fixtures', 'one-region-resources.json'), 'utf8')) as Record<string, Record<string, string>>;
  const configs: ReadonlyArray<readonly [StageName, 'on-demand' | 'managed-instances', string | undefined]> = [
    ['dev', 'on-demand', undefined],
    ['stg', 'on-demand', 'us-west-2'],
    ['prod', 'on-demand', undefined],
    ['prod', 'managed-instances', 'us-east-1'],
  ];

  it.each(configs)('%s (%s, regions %j) synthesizes the same resources as before regions existed, nothing multi-region, cdk-nag clean', (name, compute, regions) => {
    // Bundling skipped: the resources, not the bundles, are compared (main's bundles are unchanged too).
    const app = newApp(NO_BUNDLING);
    const stacks = addStage(app, stageSettings(name, { compute, regions }), { providers: PROVIDERS });
    expect(stacks.frontDoor).toBeUndefined();
    expect(stacks.regions.map((s) => s.stackName)).toEqual([`Sluice-${name}`]);
    const stack = stacks.regions[0];
    if (stack === undefined) throw new Error('no stack');
    // Environment-agnostic, as before: deployed to whichever region the CLI targets.
    expect(stack.resolve(stack.region)).toEqual({ Ref: 'AWS::Region' });
    const template = Template.fromStack(stack).toJSON() as { Resources: Record<string, { Type: string; Properties?: { Environment?: { Variables?: Record<string, unknown> } } }> };
    const resources = Object.fromEntries(Object.entries(template.Resources).map(([id, r]) => [id, r.Type]).sort());
    expect(resources).toEqual(recorded[`${name}/${compute}`]);
    for (const r of Object.values(template.Resources)) {
      if (r.Type !== 'AWS::Lambda::Function') continue;
      for (const variable of Object.values(REGION_ENV)) expect(r.Properties?.Environment?.Variables ?? {}).not.toHaveProperty(variable);
    }
    // The acknowledgements, now built for stacks with a region too, still cover the one-region stack.
    for (const pack of nagPacks()) {
      expect(pack.validateScope(stack).violations.map((v) => `${v.ruleName}: ${v.violatingResources.map((x) => x.resourceLogicalId).join(', ')}`)).toEqual([]);
    }
  });
});

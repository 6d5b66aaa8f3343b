/**
 * Bundles for the benchmark, built with the repository's esbuild into a temporary folder:
 * - the gateway handler exactly as the CDK builds it (minified, source map without sources,
 *   node22, CommonJS, `@aws-sdk/*` external), for its size and its module-init time;
 * - the benchmark's gateway process, the bare relay and the simulator, so that none runs under a
 *   TypeScript loader while it is being measured (not minified, so a CPU profile reads well).
 */
import { execFile } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';
import { summarize, type Summary } from './stats';

export const REPO_ROOT = path.resolve(__dirname, '..');

/** Built files. */
export interface Bundles {
  readonly dir: string;
  readonly handler: string;
  readonly handlerBytes: number;
  readonly handlerMapBytes: number;
  readonly shim: string;
  readonly gatewayServer: string;
  readonly bareRelay: string;
  readonly simulator: string;
}

/**
 * The gateway handler bundled as lib/sluice-function.ts builds it: minify, source map without
 * sources, node22, CommonJS, `@aws-sdk/*` and gpt-tokenizer external (run it with `NODE_PATH` at
 * the repository's node_modules, `bundleEnv`), ES modules first.
 */
export async function buildGatewayHandler(outfile: string): Promise<void> {
  await build({
    bundle: true,
    platform: 'node',
    format: 'cjs',
    logLevel: 'error',
    absWorkingDir: REPO_ROOT,
    entryPoints: [path.join(REPO_ROOT, 'lambdas/gateway/handler.ts')],
    outfile,
    minify: true,
    sourcemap: true,
    sourcesContent: false,
    target: 'node22',
    // As lib/sluice-function.ts: the tokenizer ships beside the bundle, loaded only when needed.
    external: ['@aws-sdk/*', 'gpt-tokenizer'],
    mainFields: ['module', 'main'],
  });
}

export async function buildBundles(dir: string): Promise<Bundles> {
  const handler = path.join(dir, 'handler', 'index.js');
  const shim = path.join(dir, 'shim.js');
  const gatewayServer = path.join(dir, 'gateway-server.js');
  const simulator = path.join(dir, 'simulator.js');
  const bareRelay = path.join(dir, 'bare-relay.js');
  const common = { bundle: true, platform: 'node', format: 'cjs', logLevel: 'error', absWorkingDir: REPO_ROOT } as const;
  await Promise.all([
    buildGatewayHandler(handler),
    build({ ...common, entryPoints: [path.join(REPO_ROOT, 'local/lambda-shim.ts')], outfile: shim, target: 'node20' }),
    build({
      ...common,
      entryPoints: [path.join(REPO_ROOT, 'bench/gateway-server.ts')],
      outfile: gatewayServer,
      target: 'node20',
      sourcemap: true,
      external: ['@aws-sdk/*'],
      mainFields: ['module', 'main'],
    }),
    build({ ...common, entryPoints: [path.join(REPO_ROOT, 'local/simulator/main.ts')], outfile: simulator, target: 'node20' }),
    build({ ...common, entryPoints: [path.join(REPO_ROOT, 'bench/bare-relay.ts')], outfile: bareRelay, target: 'node20' }),
  ]);
  return {
    dir,
    handler,
    handlerBytes: statSync(handler).size,
    handlerMapBytes: statSync(`${handler}.map`).size,
    shim,
    gatewayServer,
    bareRelay,
    simulator,
  };
}

/** The environment bundles run in: `@aws-sdk/*` resolved from the repository's node_modules. */
export function bundleEnv(extra: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {};
  for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG']) {
    const v = process.env[name];
    if (v !== undefined) base[name] = v;
  }
  return { ...base, NODE_PATH: path.join(REPO_ROOT, 'node_modules'), ...extra };
}

/** Module-init figures over several fresh processes. */
export interface InitResult {
  /** `require()` of the handler bundle, the shim already installed, ms. */
  readonly requireMs: Summary;
  /** `require()` of only the external `@aws-sdk/*` packages the bundle loads, ms: their share of the above. */
  readonly sdkRequireMs: Summary;
  /** The external packages the bundle requires. */
  readonly sdkPackages: readonly string[];
  /** From the process's time origin to the handler being loaded, ms. */
  readonly sinceStartMs: Summary;
  readonly runs: number;
}

const PROBE = `'use strict';
const { performance } = require('node:perf_hooks');
require(process.argv[2]).installLambdaShim();
const t0 = performance.now();
const mod = require(process.argv[3]);
const t1 = performance.now();
if (typeof mod.handler !== 'function') throw new Error('the bundle exports no handler');
process.stdout.write(JSON.stringify({ requireMs: t1 - t0, sinceStartMs: t1 }));
process.exit(0);
`;

const SDK_PROBE = `'use strict';
const { performance } = require('node:perf_hooks');
const t0 = performance.now();
for (const name of process.argv.slice(2)) require(name);
const t1 = performance.now();
process.stdout.write(JSON.stringify({ requireMs: t1 - t0, sinceStartMs: t1 }));
process.exit(0);
`;

function runProbe(probe: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<{ requireMs: number; sinceStartMs: number }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [probe, ...args], { env, timeout: 20_000 }, (err, stdout, stderr) => {
      if (err !== null) {
        reject(new Error(`module-init probe failed: ${err.message}\n${stderr}`));
        return;
      }
      resolve(JSON.parse(stdout) as { requireMs: number; sinceStartMs: number });
    });
  });
}

/**
 * Loads the handler bundle in fresh `node` processes with a deployed stage's configuration
 * (Secrets Manager client built at module scope, source maps enabled as the function has them).
 * The first run only warms the file cache and is not counted.
 */
export async function measureModuleInit(bundles: Bundles, runs: number): Promise<InitResult> {
  const probe = path.join(bundles.dir, 'init-probe.js');
  writeFileSync(probe, PROBE);
  const sdkProbe = path.join(bundles.dir, 'sdk-probe.js');
  writeFileSync(sdkProbe, SDK_PROBE);
  // The bundle's own external requires, read from the bundle, so the list cannot drift.
  const sdkPackages = [...new Set([...readFileSync(bundles.handler, 'utf8').matchAll(/require\("(@aws-sdk\/[^"]+)"\)/g)].map((m) => m[1] as string))].sort();
  const env = bundleEnv({
    NODE_OPTIONS: '--enable-source-maps',
    SLUICE_STAGE: 'dev',
    SLUICE_TABLE_PREFIX: 'sluice-dev-',
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
  });
  const handlerArgs = [bundles.shim, bundles.handler];
  await runProbe(probe, handlerArgs, env);
  await runProbe(sdkProbe, sdkPackages, env);
  const requireMs: number[] = [];
  const sinceStartMs: number[] = [];
  const sdkRequireMs: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    // Alternating, so both meet the same machine.
    const r = await runProbe(probe, handlerArgs, env);
    requireMs.push(r.requireMs);
    sinceStartMs.push(r.sinceStartMs);
    sdkRequireMs.push((await runProbe(sdkProbe, sdkPackages, env)).requireMs);
  }
  return { requireMs: summarize(requireMs), sdkRequireMs: summarize(sdkRequireMs), sdkPackages, sinceStartMs: summarize(sinceStartMs), runs };
}

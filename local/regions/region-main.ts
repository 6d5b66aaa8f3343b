/**
 * One region of `npm run start:regions`, in a process group of its own so it can be killed (SIGKILL
 * included) without the other region noticing anything but its absence. Deployed, a region's
 * gateway, aggregator, sweeper and transfer agent are separate functions, so here they run in two
 * processes, both children of this one and in its process group: the **gateway** handler on `PORT`
 * alone (nothing else on its event loop while it serves), and the **workers**: the aggregator on
 * this region's usage stream, the sweeper on a timer and the transfer agent on its ledger stream.
 * Each is the deployed handler as `npm start` runs it (`../services.ts`), configured from the
 * environment the start gives it: `SLUICE_REGION` (and `AWS_REGION`) the region's name,
 * `SLUICE_REGIONS` every region (the first is the home region), `SLUICE_DYNAMODB_ENDPOINT` the
 * region's own DynamoDB Local.
 *
 * Prints `ready <gateway url>` on stdout once both serve; stops on SIGINT or SIGTERM (both children
 * first). When either child dies, the other is stopped and this process exits: a region is up or
 * down as a whole, as `start:regions` expects.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ENV } from '../../lambdas/shared/config';
import { installLambdaShim } from '../lambda-shim';
import { sweepEveryMs } from '../sweep-interval';
import { message, portFrom, serveGateway, startAggregator, startSweeper } from '../services';
import { regionSetupFromEnv } from '../../lambdas/store/regions';
import { REGION_ENV, REGIONS_ENV } from './settings';
import { startTransferAgent } from './transfer-agent';

/** Which part a child runs (set by this process for its children). */
const PART_ENV = 'SLUICE_REGION_PART';
type Part = 'gateway' | 'workers';

/** A CommonJS bundle of the gateway handler to run instead of its sources (the regions steady bench sets it, with `NODE_PATH` for the bundle's external packages). */
const GATEWAY_BUNDLE_ENV = 'SLUICE_LOCAL_GATEWAY_BUNDLE';

/** The region's settings from the environment `start:regions` gives it. */
function settings(): { region: string; endpoint: string; prefix: string } {
  const region = process.env[REGION_ENV];
  const endpoint = process.env[ENV.dynamoEndpoint];
  const prefix = process.env[ENV.tablePrefix];
  if (region === undefined || region === '' || endpoint === undefined || prefix === undefined) {
    throw new Error(`${REGION_ENV}, ${ENV.dynamoEndpoint} and ${ENV.tablePrefix} must be set (npm run start:regions sets them)`);
  }
  return { region, endpoint, prefix };
}

/** One part, in this process: started, then `ready <what>` on stdout; stopped in reverse order on SIGINT or SIGTERM. */
async function runPart(part: Part): Promise<void> {
  const { region, endpoint, prefix } = settings();
  const say = (line: string): void => console.error(`[${region}] ${line}`);
  const stops: (() => Promise<void>)[] = [];
  let stopping = false;
  const stop = (code: number): void => {
    if (stopping) return;
    stopping = true;
    void (async () => {
      for (let next = stops.pop(); next !== undefined; next = stops.pop()) await next().catch((err: unknown) => say(`stopping: ${message(err)}`));
      process.exit(code);
    })();
  };
  process.on('SIGINT', () => stop(0));
  process.on('SIGTERM', () => stop(0));

  // The shim must be in place before the gateway module wraps itself in streamifyResponse; the
  // handlers read their configuration (this region's endpoint) when their modules load.
  installLambdaShim();
  if (part === 'gateway') {
    // The benchmark runs the gateway as deployed, from its bundle (`bench/bundle.ts`); a developer's start from the sources.
    const bundle = process.env[GATEWAY_BUNDLE_ENV];
    const gatewayModule = bundle !== undefined && bundle !== '' ? (require(bundle) as typeof import('../../lambdas/gateway/handler')) : await import('../../lambdas/gateway/handler');
    const gateway = await serveGateway(gatewayModule.handler, portFrom(process.env, 'PORT', 0), say, 'let npm run start:regions choose the ports');
    stops.push(() => gateway.close());
    process.stdout.write(`ready ${gateway.url}\n`);
    return;
  }
  const aggregatorModule = await import('../../lambdas/aggregator/handler');
  const sweeperModule = await import('../../lambdas/sweeper/handler');
  const setup = regionSetupFromEnv(process.env);
  if (setup === undefined) throw new Error(`${REGIONS_ENV} must be set (npm run start:regions sets it)`);
  // The one-region filters: the deployed mapping also narrows them to this region's rows (its
  // filters are built in lib/, with CDK), and the handler checks each record's region again
  // itself, so a replicated row is counted only by its own region either way.
  const aggregator = await startAggregator({ endpoint, tablePrefix: prefix, handler: (event) => aggregatorModule.handler(event), log: say });
  stops.push(() => aggregator.stop());
  // The transfer agent: other regions' asks and sends, read from this region's replicated ledger stream.
  const agent = await startTransferAgent({ endpoint, tablePrefix: prefix, setup, region, log: say });
  stops.push(() => agent.stop());
  const sweeper = startSweeper({
    handler: (event, context) => sweeperModule.handler(event, context),
    everyMs: sweepEveryMs(process.env),
    functionName: `sluice-local-sweeper-${region}`,
    region,
    log: say,
    warn: say,
  });
  stops.push(() => sweeper.stop());
  process.stdout.write('ready workers\n');
}

/** This process: the two parts as children in its process group, `ready <gateway url>` once both are. */
async function runRegion(): Promise<void> {
  const { region } = settings();
  const children = new Map<Part, ChildProcess>();
  let stopping = false;
  const stop = (code: number): void => {
    if (stopping) return;
    stopping = true;
    const left = [...children.values()].filter((c) => c.exitCode === null && c.signalCode === null);
    for (const c of left) c.kill('SIGTERM');
    void Promise.all(left.map((c) => new Promise((done) => c.once('exit', done)))).then(() => process.exit(code));
  };
  process.on('SIGINT', () => stop(0));
  process.on('SIGTERM', () => stop(0));
  const ready = (['gateway', 'workers'] as const).map(
    (part) =>
      new Promise<string>((resolve, reject) => {
        // Not detached: the children share this process group, so `kill -9 -<pid>` ends the whole region.
        const child = spawn(process.execPath, ['--import', 'tsx', __filename], { env: { ...process.env, [PART_ENV]: part }, stdio: ['ignore', 'pipe', 'inherit'] });
        children.set(part, child);
        createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
          const said = /^ready (\S+)$/.exec(line);
          if (said !== null) resolve(said[1] as string);
          else process.stdout.write(`${line}\n`);
        });
        child.once('exit', (code, signal) => {
          reject(new Error(`the ${part} exited during start-up (code ${code}, signal ${signal})`));
          if (!stopping) console.error(`[${region}] the ${part} exited (code ${code}, signal ${signal}): the region stops`);
          stop(1);
        });
      }),
  );
  const [url] = await Promise.all(ready);
  process.stdout.write(`ready ${url as string}\n`);
}

const part = process.env[PART_ENV];
(part === 'gateway' || part === 'workers' ? runPart(part) : runRegion()).catch((err: unknown) => {
  console.error(`[region] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});

/**
 * One region of `npm run start:regions`, in a process of its own so it can be killed (SIGKILL
 * included) without the other region noticing anything but its absence: the gateway handler on
 * `PORT`, the aggregator on this region's usage stream, the sweeper on a timer and the transfer
 * agent on its ledger stream, each the deployed
 * handler as `npm start` runs it (`../services.ts`), configured from the environment the start
 * gives it: `SLUICE_REGION` (and `AWS_REGION`) the region's name, `SLUICE_REGIONS` every region
 * (the first is the home region), `SLUICE_DYNAMODB_ENDPOINT` the region's own DynamoDB Local.
 *
 * Prints `ready <gateway url>` on stdout once serving; stops on SIGINT or SIGTERM.
 */
import { ENV } from '../../lambdas/shared/config';
import { installLambdaShim } from '../lambda-shim';
import { sweepEveryMs } from '../sweep-interval';
import { message, portFrom, serveGateway, startAggregator, startSweeper } from '../services';
import { regionSetupFromEnv } from '../../lambdas/store/regions';
import { REGION_ENV, REGIONS_ENV } from './settings';
import { startTransferAgent } from './transfer-agent';

async function main(): Promise<void> {
  const region = process.env[REGION_ENV];
  const endpoint = process.env[ENV.dynamoEndpoint];
  const prefix = process.env[ENV.tablePrefix];
  if (region === undefined || region === '' || endpoint === undefined || prefix === undefined) {
    throw new Error(`${REGION_ENV}, ${ENV.dynamoEndpoint} and ${ENV.tablePrefix} must be set (npm run start:regions sets them)`);
  }
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
  const gatewayModule = await import('../../lambdas/gateway/handler');
  const aggregatorModule = await import('../../lambdas/aggregator/handler');
  const sweeperModule = await import('../../lambdas/sweeper/handler');

  const gateway = await serveGateway(gatewayModule.handler, portFrom(process.env, 'PORT', 0), say, 'let npm run start:regions choose the ports');
  stops.push(() => gateway.close());
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
  process.stdout.write(`ready ${gateway.url}\n`);
}

main().catch((err: unknown) => {
  console.error(`[region] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});

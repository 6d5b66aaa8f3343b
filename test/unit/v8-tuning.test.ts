/**
 * Every gateway process turns V8's allocation-site pretenuring off before its first request
 * (lambdas/shared/v8-tuning.ts): the deployed handler, local mode and the bench all build the
 * gateway through `buildGateway`.
 */
import { buildGateway } from '../../lambdas/gateway/wiring';
import { loadConfig } from '../../lambdas/shared/config';
import { v8Tuned } from '../../lambdas/shared/v8-tuning';

it('buildGateway turns pretenuring off in its process', () => {
  // Jest gives each test file its own modules: nothing here has built a gateway yet.
  expect(v8Tuned()).toBe(false);
  const env: NodeJS.ProcessEnv = { SLUICE_STAGE: 'local', SLUICE_TABLE_PREFIX: 'v8-', SLUICE_DYNAMODB_ENDPOINT: 'http://127.0.0.1:9', SLUICE_SECRET_SOURCE: 'env' };
  const { wire } = buildGateway(loadConfig(env), env);
  expect(v8Tuned()).toBe(true);
  wire.destroy();
});

/**
 * Every gateway process turns V8's allocation-site pretenuring off before its first request, and
 * collects its young generation between requests (lambdas/shared/v8-tuning.ts): the deployed
 * handler, local mode and the bench all build the gateway through `buildGateway`.
 */
import { buildGateway } from '../../lambdas/gateway/wiring';
import { loadConfig } from '../../lambdas/shared/config';
import { collectBetweenRequests, IDLE_SCAVENGE_FILL, v8Tuned, youngGeneration } from '../../lambdas/shared/v8-tuning';

const env: NodeJS.ProcessEnv = { SLUICE_STAGE: 'local', SLUICE_TABLE_PREFIX: 'v8-', SLUICE_DYNAMODB_ENDPOINT: 'http://127.0.0.1:9', SLUICE_SECRET_SOURCE: 'env' };

it('buildGateway turns pretenuring off in its process', () => {
  // Jest gives each test file its own modules: nothing here has built a gateway yet.
  expect(v8Tuned()).toBe(false);
  const { wire } = buildGateway(loadConfig(env), env);
  expect(v8Tuned()).toBe(true);
  wire.destroy();
});

/** Allocates short-lived objects until the young generation is at least `fill` full (V8 may collect on the way). */
function fillYoungGeneration(fill: number): void {
  let keep: unknown[] = [];
  for (let i = 0; ; i += 1) {
    keep.push({ i, text: `garbage ${i}` });
    if (keep.length === 1000) {
      keep = [];
      const young = youngGeneration();
      if (young.usedBytes >= fill * young.capacityBytes) return;
    }
  }
}

it('collects the young generation between requests once it is half full, and not before', () => {
  fillYoungGeneration(IDLE_SCAVENGE_FILL + 0.1);
  const before = youngGeneration();
  expect(before.usedBytes).toBeGreaterThanOrEqual(IDLE_SCAVENGE_FILL * before.capacityBytes);
  expect(collectBetweenRequests()).toBe(true);
  // What it held was garbage: a scavenge copies only what is alive.
  const after = youngGeneration();
  expect(after.usedBytes).toBeLessThan(before.usedBytes / 2);
  expect(after.usedBytes).toBeLessThan(IDLE_SCAVENGE_FILL * after.capacityBytes);
  // Under half full, nothing is collected.
  expect(collectBetweenRequests()).toBe(false);
  expect(youngGeneration().usedBytes).toBeGreaterThanOrEqual(after.usedBytes);
});

it('buildGateway wires the collection as the idle port; a caller may replace it', () => {
  const idle = (): void => undefined;
  const built = buildGateway(loadConfig(env), env, { idle });
  const deps = (built.gateway as unknown as { deps: { idle?: unknown } }).deps;
  expect(deps.idle).toBe(idle);
  built.wire.destroy();
  const plain = buildGateway(loadConfig(env), env);
  expect((plain.gateway as unknown as { deps: { idle?: unknown } }).deps.idle).toBe(collectBetweenRequests);
  plain.wire.destroy();
});

it("goes on without collecting when V8's gc() cannot be had", () => {
  jest.isolateModules(() => {
    jest.doMock('node:vm', () => ({
      runInNewContext: () => {
        throw new ReferenceError('gc is not defined');
      },
    }));
    const isolated = jest.requireActual<typeof import('../../lambdas/shared/v8-tuning')>('../../lambdas/shared/v8-tuning');
    fillYoungGeneration(IDLE_SCAVENGE_FILL + 0.1);
    expect(isolated.collectBetweenRequests()).toBe(false);
    expect(isolated.collectBetweenRequests()).toBe(false);
  });
  jest.dontMock('node:vm');
});

it('never collects when it cannot find the young generation', () => {
  jest.isolateModules(() => {
    const v8 = jest.requireActual<typeof import('node:v8')>('node:v8');
    const collected: unknown[] = [];
    jest.doMock('node:v8', () => ({ ...v8, getHeapSpaceStatistics: () => v8.getHeapSpaceStatistics().filter((s) => s.space_name !== 'new_space') }));
    jest.doMock('node:vm', () => ({ runInNewContext: () => (options: unknown) => collected.push(options) }));
    const isolated = jest.requireActual<typeof import('../../lambdas/shared/v8-tuning')>('../../lambdas/shared/v8-tuning');
    expect(isolated.youngGeneration()).toEqual({ usedBytes: 0, capacityBytes: 0 });
    expect(isolated.collectBetweenRequests()).toBe(false);
    expect(collected).toEqual([]);
  });
  jest.dontMock('node:v8');
  jest.dontMock('node:vm');
});

/**
 * The CPU share's pure parts (`bench/cpu-share.ts`): which memory sizes are measured, which targets
 * an entry misses, the cheapest size that meets them all, the table; and the bench's switches for
 * it and for the cost model (`bench/args.ts`).
 */
import { DEPLOYED_NODE_MAJOR, FULL, QUICK, deployedRuntimeNote, parseArgs } from '../../bench/args';
import { MB_PER_VCPU, PERIOD_US, cheapestMet, lambdaNodeOptions, memorySizes, missedTargets, renderCpuShare, type CpuShareEntry } from '../../bench/cpu-share';

const LIMITS = { addedP50Ms: 7, addedP99Ms: 20, ttfbAddedP50Ms: 7, ttfbAddedP99Ms: 20, gapAddedP99Ms: 1 };

function entry(memoryMb: number, over: Partial<CpuShareEntry> = {}): CpuShareEntry {
  const figures = { addedP50Ms: 5, addedP99Ms: 10, ttfbAddedP50Ms: 5, ttfbAddedP99Ms: 10, gapAddedP99Ms: 0.5, limits: LIMITS, ...over };
  const missed = missedTargets(figures);
  return {
    memoryMb,
    nodeOptions: lambdaNodeOptions(memoryMb),
    cpuShare: memoryMb / MB_PER_VCPU,
    quotaUs: Math.round((PERIOD_US * memoryMb) / MB_PER_VCPU),
    periodUs: PERIOD_US,
    settleP50Ms: 3,
    cpuPerRequestUs: 2_000,
    peakRssMiB: 90,
    throttledPeriodsPerRequest: 0,
    throttledMsPerRequest: 0,
    ...figures,
    missed,
    met: missed.length === 0,
  };
}

describe('memorySizes', () => {
  it('measures the planned sizes and every stage\'s own, once each, smallest first', () => {
    expect(memorySizes([128], [512, 1024, 1024])).toEqual([128, 512, 1024]);
    expect(memorySizes(FULL.cpuShare.memoryMb, [1536])).toEqual([128, 256, 512, 1024, 1536]);
  });

  it('a quick run measures 128 MB at least', () => {
    expect(QUICK.cpuShare.memoryMb).toContain(128);
    expect(QUICK.cpuShare.latencyIterations).toBeLessThan(FULL.cpuShare.latencyIterations);
  });
});

describe('missedTargets', () => {
  it.each([
    ['nothing when every figure is at or under its limit', {}, []],
    ['a figure on its limit is met', { addedP50Ms: 7, gapAddedP99Ms: 1 }, []],
    ['the added latency at p50', { addedP50Ms: 7.01 }, ['added latency p50']],
    ['the first byte at p99 and the gap', { ttfbAddedP99Ms: 21, gapAddedP99Ms: 18 }, ['added first byte p99', 'added chunk gap p99']],
    ['a figure that could not be measured', { addedP99Ms: Number.NaN }, ['added latency p99']],
  ])('%s', (_name, over, missed) => {
    expect(missedTargets({ addedP50Ms: 5, addedP99Ms: 10, ttfbAddedP50Ms: 5, ttfbAddedP99Ms: 10, gapAddedP99Ms: 0.5, limits: LIMITS, ...over })).toEqual(missed);
  });
});

describe('cheapestMet', () => {
  it('is the smallest size that met every target, or null', () => {
    expect(cheapestMet([entry(128, { gapAddedP99Ms: 18 }), entry(512), entry(256)])).toBe(256);
    expect(cheapestMet([entry(128, { addedP50Ms: 60 })])).toBeNull();
    expect(cheapestMet([])).toBeNull();
  });
});

describe('renderCpuShare', () => {
  it('prints each size with its limits, what it missed, and each stage against its own size', () => {
    const text = renderCpuShare([entry(128, { gapAddedP99Ms: 18.5 }), entry(512)], [{ name: 'dev', memoryMb: 512 }, { name: 'prod', memoryMb: 1024 }]);
    expect(text).toContain('128 MB (1447/20000 us)');
    expect(text).toContain('MISSED: added chunk gap p99');
    expect(text).toContain('cheapest memory measured that meets every target: 512 MB');
    expect(text).toContain('dev deploys 512 MB: targets met');
    expect(text).toContain('prod deploys 1024 MB: not measured');
    expect(text).toContain("each size's gateway ran with its Lambda heap: 128 MB semi-space 6 MiB, old 116 MiB; 512 MB semi-space 25 MiB, old 461 MiB");
  });

  it('shows the heap an override gave, the last of each option winning as in node', () => {
    const text = renderCpuShare([entry(256, { nodeOptions: [...lambdaNodeOptions(256), '--max-semi-space-size=32'] })], []);
    expect(text).toContain('256 MB semi-space 32 MiB, old 231 MiB');
  });
});

describe('lambdaNodeOptions', () => {
  it("gives node what Lambda's bootstrap gives it: a tenth of the memory young, in two semi-spaces, the rest old", () => {
    expect(lambdaNodeOptions(128)).toEqual(['--expose-gc', '--max-http-header-size=81920', '--max-semi-space-size=6', '--max-old-space-size=116']);
    expect(lambdaNodeOptions(256)).toEqual(['--expose-gc', '--max-http-header-size=81920', '--max-semi-space-size=12', '--max-old-space-size=231']);
    expect(lambdaNodeOptions(512).slice(2)).toEqual(['--max-semi-space-size=25', '--max-old-space-size=461']);
    expect(lambdaNodeOptions(1024).slice(2)).toEqual(['--max-semi-space-size=51', '--max-old-space-size=922']);
    // The shell's integer arithmetic: 1,769 MB is 176 MiB young, 88 a semi-space.
    expect(lambdaNodeOptions(1769).slice(2)).toEqual(['--max-semi-space-size=88', '--max-old-space-size=1593']);
  });

  it('refuses a memory Lambda does not offer', () => {
    expect(() => lambdaNodeOptions(127)).toThrow(/from 128/);
    expect(() => lambdaNodeOptions(256.5)).toThrow(/whole number/);
  });
});

describe('parseArgs', () => {
  it.each([
    [['--cpu-share-only'], { cpuShareOnly: true, noCpuShare: false, costOnly: false }],
    [['--no-cpu-share', '--quick'], { cpuShareOnly: false, noCpuShare: true, quick: true }],
    [['--cost-only'], { costOnly: true, providerMs: 0, gatewayNodeOptions: [] }],
    [['--cpu-share-only', '--provider-ms', '50', '--gateway-node-options=--max-semi-space-size=32  --single-threaded-gc'], { providerMs: 50, gatewayNodeOptions: ['--max-semi-space-size=32', '--single-threaded-gc'] }],
  ])('reads %j', (argv, expected) => {
    expect(parseArgs(argv)).toMatchObject(expected);
  });

  it('refuses a switch it does not know, naming the ones it does', () => {
    expect(() => parseArgs(['--cpu-share'])).toThrow(/--cpu-share-only, --no-cpu-share, --cost-only/);
  });

  it('refuses a provider time that is not whole milliseconds, and node options that are not options', () => {
    expect(() => parseArgs(['--provider-ms=-1'])).toThrow(/--provider-ms takes whole milliseconds/);
    expect(() => parseArgs(['--provider-ms', '2.5'])).toThrow(/--provider-ms takes whole milliseconds/);
    expect(() => parseArgs(['--gateway-node-options', 'semi=32'])).toThrow(/each starting with --/);
  });

  it('takes a node binary for the gateway, and refuses a path that is not one', () => {
    expect(parseArgs(['--gateway-node', process.execPath]).gatewayNode).toBe(process.execPath);
    expect(parseArgs([]).gatewayNode).toBeUndefined();
    expect(() => parseArgs(['--gateway-node', '/nonexistent/node'])).toThrow(/--gateway-node takes the path of a node binary/);
    expect(() => parseArgs(['--gateway-node', __dirname])).toThrow(/not an executable file/);
  });
});

describe("the gateway's Node against the deployed runtime's", () => {
  it('says nothing for the deployed major, and names the flag for any other', () => {
    expect(deployedRuntimeNote(`v${DEPLOYED_NODE_MAJOR}.23.3`)).toBeUndefined();
    expect(deployedRuntimeNote('v20.20.2')).toMatch(new RegExp(`Node v20\\.20\\.2; the deployed functions run Node\\.js ${DEPLOYED_NODE_MAJOR} .*--gateway-node PATH`));
    expect(deployedRuntimeNote(`v${DEPLOYED_NODE_MAJOR + 1}.0.0`)).toBeDefined();
  });
});

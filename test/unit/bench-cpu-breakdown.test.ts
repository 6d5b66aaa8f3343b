/**
 * The CPU breakdown's bookkeeping (`bench/cpu-breakdown.ts`): which part a stack is charged to,
 * and the sums over a CPU profile and a sampling heap profile; and a stream's fixed CPU
 * (`bench/phases/stream-cpu.ts`).
 */
import { allocationsByPart, partOf, profileByPart, render, type Breakdown } from '../../bench/cpu-breakdown';
import { fixedPerStream } from '../../bench/phases/stream-cpu';

const at = (file: string): string => `file:///repo/${file}`;

describe('partOf', () => {
  it.each([
    ['a hash under the signer', ['node:internal/crypto/hash', at('lambdas/adapters/sigv4.ts'), at('lambdas/adapters/dynamo-wire.ts')], 'store client: SigV4'],
    ["Node's socket write under DynamoWire's post", ['node:net', 'node:internal/streams/writable', at('lambdas/adapters/dynamo-wire.ts'), at('lambdas/store/ledger.ts')], 'store client: HTTP, retries, reply parse'],
    ['marshalling for the rare reads', [at('node_modules/@aws-sdk/util-dynamodb/dist-cjs/index.js'), at('lambdas/adapters/dynamo-wire.ts')], 'store client: request JSON, reply values'],
    ['the ledger building its items', [at('lambdas/store/expr.ts'), at('lambdas/store/ledger.ts'), at('lambdas/gateway/admit.ts')], 'ledger and lookups (store items, conditions, caches)'],
    ['the EMF line', [at('lambdas/shared/emf.ts'), at('lambdas/adapters/emf-telemetry.ts'), at('lambdas/gateway/app.ts')], 'telemetry line (EMF)'],
    ['the gateway phases', [at('lambdas/core/json-splice.ts'), at('lambdas/gateway/relay-body.ts')], 'gateway phases and core'],
    ['a socket write seen from a Sluice frame, still a system call', ['(writev)', 'node:internal/stream_base_commons', at('lambdas/adapters/dynamo-wire.ts')], 'system calls (socket and log writes; wall time, waits included)'],
    ['the collector', ['(garbage collector)'], 'garbage collector (main thread)'],
    ["Node's HTTP parser with no Sluice frame", ['node:_http_common', 'node:_http_client'], 'Node: HTTP (parser, agent, messages)'],
    ['a microtask turn', ['(runMicrotasks)'], 'Node: promises, ticks, timers'],
    ['something else', ['node:fs'], 'Node: other'],
  ])('charges %s to its part', (_name, frames, part) => {
    expect(partOf(frames)).toBe(part);
  });
});

describe('profileByPart', () => {
  const node = (id: number, url: string, children: number[] = [], functionName = 'f') => ({ id, callFrame: { functionName, url }, children });

  it('sums each sample to its part, leaves idle out, and reads the stack through the parents', () => {
    const profile = {
      nodes: [
        node(1, '', [2, 5], '(root)'),
        node(2, at('lambdas/adapters/dynamo-wire.ts'), [3]),
        node(3, 'node:net', [4]),
        node(4, 'node:internal/stream_base_commons'),
        node(5, '', [], '(idle)'),
        node(6, '', [], '(garbage collector)'),
      ],
      samples: [4, 4, 3, 5, 5, 5, 6],
      timeDeltas: [10, 20, 30, 1000, 1000, 1000, 7],
    };
    profile.nodes[0]?.children.push(6);
    expect(Object.fromEntries(profileByPart(profile))).toEqual({ 'store client: HTTP, retries, reply parse': 60, 'garbage collector (main thread)': 7 });
  });

  it("leaves out the inspector's own call (stopping the profiler), however deep", () => {
    const profile = {
      nodes: [
        node(1, '', [2, 5], '(root)'),
        node(2, at('bench/cpu-breakdown.ts'), [3]),
        node(3, 'node:inspector', [4], 'post'),
        node(4, '', [], 'dispatch'),
        node(5, at('lambdas/gateway/app.ts')),
      ],
      samples: [4, 4, 3, 5],
      timeDeltas: [1500, 1500, 100, 40],
    };
    expect(Object.fromEntries(profileByPart(profile))).toEqual({ 'gateway phases and core': 40 });
  });
});

describe('allocationsByPart', () => {
  it('charges self sizes along the tree, and by function', () => {
    interface Heap {
      callFrame: { functionName: string; url: string };
      selfSize: number;
      children: Heap[];
    }
    const heapNode = (functionName: string, url: string, selfSize: number, children: Heap[] = []): Heap => ({ callFrame: { functionName, url }, selfSize, children });
    const head = heapNode('(root)', '', 0, [
      heapNode('send', at('lambdas/adapters/dynamo-wire.ts'), 100, [heapNode('entryJson', at('lambdas/adapters/dynamo-json.ts'), 400), heapNode('Buffer', 'node:buffer', 50)]),
      heapNode('build', at('lambdas/store/expr.ts'), 300),
    ]);
    const { byPart, byFunction } = allocationsByPart(head);
    expect(Object.fromEntries(byPart)).toEqual({
      'store client: HTTP, retries, reply parse': 150,
      'store client: request JSON, reply values': 400,
      'ledger and lookups (store items, conditions, caches)': 300,
    });
    expect(byFunction.get('entryJson lambdas/adapters/dynamo-json.ts')).toBe(400);
    expect(byFunction.get('Buffer node:buffer')).toBe(50);
  });
});

describe('fixedPerStream', () => {
  it('is the stream less its frames at the per-chunk figure', () => {
    expect(fixedPerStream(2_000, 5, 15)).toBe(1_925);
    expect(fixedPerStream(300, 0, 15)).toBe(300);
  });
});

describe('render', () => {
  it('prints each figure and every part with its share', () => {
    const breakdown: Breakdown = {
      when: '2026-11-26T00:00:00.000Z',
      loadAverage: [1, 2, 3],
      requests: 10,
      streams: 5,
      framesPerLongStream: 102,
      framesPerShortStream: 4,
      cpuPerRequestUs: 900,
      cpuPerShortStreamUs: 1_000,
      cpuPerChunkUs: 10,
      fixedCpuPerStreamUs: 960,
      gcPausePerRequestUs: 20,
      gcPerRequest: 0.02,
      instructions: { perRequest: 3_000_000, perShortStream: 3_100_000, perChunk: 40_000, fixedPerStream: 2_940_000 },
      profilePerRequestUs: { 'store client: SigV4': 30, 'gateway phases and core': 90 },
      profilePerStreamUs: {},
      allocatedPerRequestBytes: { 'ledger and lookups (store items, conditions, caches)': 1_000 },
      allocatedPerStreamBytes: {},
      allocatedPerRequestByFunction: {},
    };
    const text = render(breakdown);
    expect(text).toMatch(/per non-streamed request\s+900 us/);
    expect(text).toMatch(/fixed per stream \(short stream less its frames\)\s+960 us/);
    expect(text).toMatch(/instructions .* per request 3000000, per short stream 3100000, per chunk 40000, fixed per stream 2940000/);
    expect(text).toMatch(/store client: SigV4\s+30\.0 us\s+25\.0%/);
    expect(text).toMatch(/gateway phases and core\s+90\.0 us\s+75\.0%/);
  });
});

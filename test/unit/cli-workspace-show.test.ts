/**
 * `sluice workspace show` for people, in a stage with several regions: each region's part, and
 * the credit in transit between them (a top-up's spread, a transfer) when there is some, said to
 * be in `available` (docs/regions.md, "A top-up's spread").
 */
import { describeWorkspace, type WorkspaceView } from '../../cli/commands';

const m = (micros: number): { micros: number } => ({ micros });

function view(over: Partial<WorkspaceView>): WorkspaceView {
  return {
    workspaceId: 'ws_1',
    name: 'Acme',
    createdAt: '2026-11-01T00:00:00.000Z',
    paused: false,
    spendRateCapMinor: 5000,
    monthlyLimit: null,
    lowCreditThreshold: null,
    permittedModels: null,
    defaultProfile: null,
    byokProviders: [],
    keySlots: 1,
    balance: { available: m(15_000_000_000), held: m(0), spent: m(0), credited: m(15_000_000_000) },
    month: { id: '2026-11', settled: m(0), held: m(0) },
    members: [],
    profiles: [],
    ...over,
  };
}

describe('workspace show, by region', () => {
  it("prints each region's part and what is in transit between them", () => {
    const lines = describeWorkspace(
      view({
        regions: [
          { region: 'us-east-1', available: m(10_000_000_000), held: m(0) },
          { region: 'us-west-2', available: m(0), held: m(0) },
        ],
        inTransit: m(5_000_000_000),
      }),
    );
    expect(lines.filter((l) => l.startsWith('  in'))).toEqual([
      '  in us-east-1      available USD 100.00, held USD 0.00',
      '  in us-west-2      available USD 0.00, held USD 0.00',
      '  in transit       USD 50.00 (between regions; in available)',
    ]);
  });

  it('says nothing of transit when nothing is moving, or in a stage with one region', () => {
    const two = describeWorkspace(view({ regions: [{ region: 'us-east-1', available: m(1), held: m(0) }, { region: 'us-west-2', available: m(0), held: m(0) }], inTransit: m(0) }));
    expect(two.some((l) => l.includes('in transit'))).toBe(false);
    const one = describeWorkspace(view({ regions: null, inTransit: null }));
    expect(one.some((l) => l.startsWith('  in'))).toBe(false);
  });
});

/** The ledger's shrinking hook: when a process reports a workspace's admissions, and what it writes. */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DocumentSender } from '../../lambdas/adapters/dynamo-wire';
import { FLUSH_ADMISSIONS, FLUSH_INTERVAL_MS, SLICE_STATS_SK, SliceStatsRecorder } from '../../lambdas/store/slice-stats';

const T0 = Date.UTC(2027, 2, 1, 12, 0, 5);

/** A client that answers every stats update as a new item, and records it. */
function fakeDb(): { db: DocumentSender; updates: UpdateCommand['input'][] } {
  const updates: UpdateCommand['input'][] = [];
  const send = async (command: unknown): Promise<unknown> => {
    if (!(command instanceof UpdateCommand)) throw new Error('only stats updates are expected');
    updates.push(command.input);
    return { Attributes: {} };
  };
  return { db: { send } as unknown as DocumentSender, updates };
}

describe('SliceStatsRecorder.note and flush', () => {
  it.each<[string, { admissions: number; conflictAt?: number; believed: number; lastAfterMs: number }, number]>([
    ['a quiet one-slice workspace, a minute on: no report (it pays nothing)', { admissions: 5, believed: 1, lastAfterMs: FLUSH_INTERVAL_MS + 1 }, 0],
    ['a one-slice workspace that met a conflict, a minute on: reports', { admissions: 5, conflictAt: 2, believed: 1, lastAfterMs: FLUSH_INTERVAL_MS + 1 }, 1],
    ['a sliced workspace, a minute on: reports (shrinking needs it)', { admissions: 5, believed: 4, lastAfterMs: FLUSH_INTERVAL_MS + 1 }, 1],
    ['a sliced workspace within the minute: not yet', { admissions: 5, believed: 4, lastAfterMs: FLUSH_INTERVAL_MS - 1 }, 0],
    [`any workspace at ${FLUSH_ADMISSIONS} admissions: reports`, { admissions: FLUSH_ADMISSIONS, believed: 1, lastAfterMs: 0 }, 1],
  ])('%s', async (_name, spec, reports) => {
    const { db, updates } = fakeDb();
    let now = T0;
    const consolidate = jest.fn(async () => true);
    const recorder = new SliceStatsRecorder(db, 'ledger', consolidate, () => now);
    const pending: Promise<void>[] = [];
    for (let i = 0; i < spec.admissions; i += 1) {
      if (i === spec.admissions - 1) now = T0 + spec.lastAfterMs;
      recorder.note('ws_a', i === spec.conflictAt, spec.believed);
      // As the ledger does: counted at admission, reported from the settlement after it.
      const p = recorder.flush('ws_a');
      if (p !== undefined) pending.push(p);
    }
    await Promise.all(pending);
    expect(pending).toHaveLength(reports);
    expect(updates.length > 0).toBe(reports > 0);
    for (const u of updates) expect(u.Key).toEqual({ pk: 'WS#ws_a', sk: SLICE_STATS_SK });
    if (reports > 0) expect(updates[0]?.ExpressionAttributeValues).toMatchObject({ ':a': spec.admissions, ':c': spec.conflictAt === undefined ? 0 : 1, ':m': Math.floor(now / 60_000) });
    // Reports that show no quiet quarter hour never consolidate.
    expect(consolidate).not.toHaveBeenCalled();
  });
});

/**
 * Local mode's low-credit notifier (issue 13): its interval is a setting, and a notice is one log
 * line and one appended event line in the EventBridge entry's shape, metadata only.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_NOTIFY_EVERY_MS, LocalNoticePublisher, NOTIFY_EVERY_ENV, notifyEveryMs } from '../../local/notifier';

describe('notifyEveryMs', () => {
  it.each([
    [undefined, DEFAULT_NOTIFY_EVERY_MS],
    ['', DEFAULT_NOTIFY_EVERY_MS],
    ['500', 500],
    ['100', 100],
  ])('%j → %i', (raw, expected) => {
    expect(notifyEveryMs({ [NOTIFY_EVERY_ENV]: raw })).toBe(expected);
  });

  it.each(['99', '0', '-5', '1.5', 'soon'])('refuses %j', (raw) => {
    expect(() => notifyEveryMs({ [NOTIFY_EVERY_ENV]: raw })).toThrow(NOTIFY_EVERY_ENV);
  });
});

describe('LocalNoticePublisher', () => {
  it('writes one log line and appends one event per notice', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-notices-'));
    try {
      const file = join(dir, 'events.jsonl');
      const lines: string[] = [];
      const publisher = new LocalNoticePublisher(file, (line) => lines.push(line));
      const notice = { crossingId: 'lc_1', workspaceId: 'ws_a', thresholdMicros: 500_000_000, availableMicros: 420_000_000, at: Date.UTC(2026, 0, 2), stage: 'local' };
      await publisher.publish(notice);
      await publisher.publish({ ...notice, crossingId: 'lc_2' });
      expect(lines).toHaveLength(2);
      expect(lines[0]).toBe(`low credit: workspace ws_a has USD 4.20 available, below its threshold USD 5.00 (notice lc_1, event in ${file})`);
      const events = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(events).toEqual([
        {
          source: 'sluice',
          'detail-type': 'Low credit',
          detail: { crossingId: 'lc_1', workspaceId: 'ws_a', stage: 'local', thresholdMicros: 500_000_000, availableMicros: 420_000_000, at: '2026-01-02T00:00:00.000Z' },
        },
        expect.objectContaining({ detail: expect.objectContaining({ crossingId: 'lc_2' }) }),
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

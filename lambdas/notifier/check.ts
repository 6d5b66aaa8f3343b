/**
 * One run of the low-credit notifier (an EventBridge schedule, off the request path): for every
 * workspace with a threshold, read its available credit, decide (`lambdas/core/low-credit.ts`),
 * and on a new crossing record it with a conditional write, then publish it. The conditional
 * write is what makes it one notice per crossing however many runs overlap; a publish that fails
 * clears the record again, so the next run retries rather than the notice being lost.
 */
import { decideLowCredit } from '../core/low-credit';
import { stageCountsLine } from '../shared/emf';
import type { BalanceReader, LowCreditNotice, NoticePublisher, NoticeStore, WatchedWorkspace } from './ports';

/** What {@link checkLowCredit} runs on. */
export interface CheckDeps {
  readonly store: NoticeStore;
  readonly readBalance: BalanceReader;
  readonly publisher: NoticePublisher;
  /** A fresh crossing id. */
  readonly newId: () => string;
  /** Stage name, the `Stage` dimension of the metrics and a field of each notice. */
  readonly stage: string;
  /** Where the EMF line and error lines go. @default a line on stdout */
  readonly writeLine?: (line: string) => void;
  /** Workspaces checked at once. @default 8 */
  readonly concurrency?: number;
}

/** What one run did. */
export interface CheckResult {
  readonly checked: number;
  readonly notified: number;
  readonly rearmed: number;
  /** Workspaces whose check or publish failed (retried next run). */
  readonly failed: number;
}

/** Checks every watched workspace once; never throws for one workspace's failure. */
export async function checkLowCredit(deps: CheckDeps, now: number): Promise<CheckResult> {
  const write = deps.writeLine ?? ((line: string) => void process.stdout.write(`${line}\n`));
  let checked = 0;
  let notified = 0;
  let rearmed = 0;
  let failed = 0;

  const one = async (ws: WatchedWorkspace): Promise<void> => {
    checked += 1;
    try {
      // No balance item yet means nothing was ever credited: nothing is available.
      const availableMicros = (await deps.readBalance(ws.workspaceId)) ?? 0;
      const decision = decideLowCredit({
        thresholdMicros: typeof ws.thresholdMicros === 'number' ? ws.thresholdMicros : undefined,
        availableMicros,
        notified: ws.crossingId !== undefined,
      });
      if (decision === 'rearm' && ws.crossingId !== undefined) {
        await deps.store.clear(ws.workspaceId, ws.crossingId);
        rearmed += 1;
      } else if (decision === 'notify') {
        const notice: LowCreditNotice = {
          crossingId: deps.newId(),
          workspaceId: ws.workspaceId,
          thresholdMicros: ws.thresholdMicros as number,
          availableMicros,
          at: now,
          stage: deps.stage,
        };
        if (!(await deps.store.record(notice))) return; // an overlapping run owns this crossing
        try {
          await deps.publisher.publish(notice);
          notified += 1;
        } catch (err) {
          await deps.store.clear(ws.workspaceId, notice.crossingId);
          throw err;
        }
      }
    } catch (err) {
      failed += 1;
      write(JSON.stringify({ level: 'error', event: 'low_credit_check_failed', workspaceId: ws.workspaceId, fault: err instanceof Error ? err.name : typeof err }));
    }
  };

  const limit = deps.concurrency ?? 8;
  const running = new Set<Promise<void>>();
  for await (const ws of deps.store.watched()) {
    const p: Promise<void> = one(ws).finally(() => running.delete(p));
    running.add(p);
    if (running.size >= limit) await Promise.race(running);
  }
  await Promise.all(running);

  write(stageCountsLine(deps.stage, now, { event: 'low_credit_check', checked, rearmed }, { LowCreditNotices: notified, LowCreditCheckFailures: failed }));
  return { checked, notified, rearmed, failed };
}

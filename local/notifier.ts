/**
 * Local mode's low-credit notifier: the deployed notifier's very check (`lambdas/notifier/check.ts`,
 * the same store and balance reader) on a timer, publishing to what a developer can watch instead
 * of EventBridge and SNS: one `[sluice] low credit: …` line on stdout and one JSON line (the
 * event EventBridge would carry) appended to `.sluice/events.jsonl`. Like the deployed one it
 * announces each crossing once, never once per request.
 */
import { randomUUID } from 'node:crypto';
import { appendFile } from 'node:fs/promises';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { formatMoney } from '../lambdas/core/money-format';
import { checkLowCredit, type CheckResult } from '../lambdas/notifier/check';
import type { LowCreditNotice, NoticePublisher } from '../lambdas/notifier/ports';
import { EVENT_SOURCE, LOW_CREDIT_DETAIL_TYPE, noticeDetail } from '../lambdas/notifier/publishers';
import { tableName } from '../lambdas/shared/schema';
import { DynamoNoticeStore, availableCredit } from '../lambdas/store/notices';

/** The variable that sets how often the local notifier runs, milliseconds. */
export const NOTIFY_EVERY_ENV = 'SLUICE_LOCAL_NOTIFY_EVERY_MS';
/** @default one minute (deployed stages run it every five; locally a notice should not keep a developer waiting) */
export const DEFAULT_NOTIFY_EVERY_MS = 60_000;
const MIN_NOTIFY_EVERY_MS = 100;

/** The notifier's interval from the environment; throws on a value that is not a whole number ≥ 100. */
export function notifyEveryMs(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env[NOTIFY_EVERY_ENV];
  if (raw === undefined || raw === '') return DEFAULT_NOTIFY_EVERY_MS;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < MIN_NOTIFY_EVERY_MS) {
    throw new Error(`${NOTIFY_EVERY_ENV} must be a whole number of milliseconds >= ${MIN_NOTIFY_EVERY_MS}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

/** Publishes a notice as a log line and an appended event line (the EventBridge entry's shape). */
export class LocalNoticePublisher implements NoticePublisher {
  constructor(
    private readonly eventsFile: string,
    private readonly log: (line: string) => void,
  ) {}

  async publish(notice: LowCreditNotice): Promise<void> {
    const event = { source: EVENT_SOURCE, 'detail-type': LOW_CREDIT_DETAIL_TYPE, detail: noticeDetail(notice) };
    await appendFile(this.eventsFile, `${JSON.stringify(event)}\n`, { mode: 0o600 });
    this.log(
      `low credit: workspace ${notice.workspaceId} has ${formatMoney(notice.availableMicros)} available, below its threshold ` +
        `${formatMoney(notice.thresholdMicros)} (notice ${notice.crossingId}, event in ${this.eventsFile})`,
    );
  }
}

/** A running local notifier. */
export interface LocalNotifier {
  /** Runs one check now (unless one is running) and resolves when it is done. */
  runOnce(): Promise<CheckResult | undefined>;
  /** Stops the timer and waits for a check in flight. */
  stop(): Promise<void>;
}

/** Starts the check on a timer over a stage's tables; a run still going when the next is due is not doubled. */
export function startLocalNotifier(input: {
  readonly doc: DynamoDBDocumentClient;
  readonly tablePrefix: string;
  readonly everyMs: number;
  readonly eventsFile: string;
  readonly log: (line: string) => void;
  readonly warn: (line: string) => void;
}): LocalNotifier {
  const t = (name: Parameters<typeof tableName>[1]): string => tableName(input.tablePrefix, name);
  const deps = {
    store: new DynamoNoticeStore(input.doc, t('workspaces')),
    readBalance: availableCredit(input.doc, { ledger: t('ledger'), usage: t('usage') }),
    publisher: new LocalNoticePublisher(input.eventsFile, input.log),
    newId: () => `lc_${randomUUID()}`,
    stage: 'local',
    // The check's metric line is for CloudWatch; locally only its error lines are worth a look.
    writeLine: (line: string) => {
      if (line.includes('"level":"error"')) input.warn(`notifier: ${line}`);
    },
  };
  let running: Promise<CheckResult | undefined> | undefined;
  const runOnce = (): Promise<CheckResult | undefined> => {
    if (running !== undefined) return running;
    running = checkLowCredit(deps, Date.now())
      .catch((err: unknown) => {
        input.warn(`notifier: ${err instanceof Error ? err.message : String(err)}`);
        return undefined;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  const timer = setInterval(() => void runOnce(), input.everyMs);
  return {
    runOnce,
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

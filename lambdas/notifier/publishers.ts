/**
 * Where a low-credit notice goes: an EventBridge event (for whatever the operator wires to it:
 * a billing e-mail, a CRM, a webhook) and the stage's SNS topic (the operators' inbox). Both
 * carry the same metadata; neither carries a key or anything a request sent.
 */
import { PutEventsCommand, type EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { PublishCommand, type SNSClient } from '@aws-sdk/client-sns';
import { formatMinor } from '../core/pricing';
import type { LowCreditNotice, NoticePublisher } from './ports';

/** EventBridge `source` of Sluice's events. */
export const EVENT_SOURCE = 'sluice';
/** EventBridge `detail-type` of the notice. */
export const LOW_CREDIT_DETAIL_TYPE = 'Low credit';

/** Thrown when a publisher reports that the notice was not accepted. */
export class NoticeNotDeliveredError extends Error {
  override readonly name = 'NoticeNotDeliveredError';
}

/** The event's `detail`: the notice, with money in micro-units as everywhere in the ledger. */
export function noticeDetail(notice: LowCreditNotice): Record<string, string | number> {
  return {
    crossingId: notice.crossingId,
    workspaceId: notice.workspaceId,
    stage: notice.stage,
    thresholdMicros: notice.thresholdMicros,
    availableMicros: notice.availableMicros,
    at: new Date(notice.at).toISOString(),
  };
}

/** Publishes to an EventBridge bus (the account's default bus unless told otherwise). */
export class EventBridgePublisher implements NoticePublisher {
  constructor(
    private readonly client: Pick<EventBridgeClient, 'send'>,
    private readonly eventBusName = 'default',
  ) {}

  async publish(notice: LowCreditNotice): Promise<void> {
    const out = await this.client.send(
      new PutEventsCommand({
        Entries: [
          {
            EventBusName: this.eventBusName,
            Source: EVENT_SOURCE,
            DetailType: LOW_CREDIT_DETAIL_TYPE,
            Detail: JSON.stringify(noticeDetail(notice)),
            Time: new Date(notice.at),
          },
        ],
      }),
    );
    // PutEvents answers 200 even when an entry was refused; the count says so.
    if ((out.FailedEntryCount ?? 0) > 0) {
      throw new NoticeNotDeliveredError(`EventBridge refused the notice: ${out.Entries?.[0]?.ErrorCode ?? 'unknown'}`);
    }
  }
}

/** Publishes to an SNS topic: a subject a person can read, the event's detail as the message's last line. */
export class SnsPublisher implements NoticePublisher {
  constructor(
    private readonly client: Pick<SNSClient, 'send'>,
    private readonly topicArn: string,
  ) {}

  async publish(notice: LowCreditNotice): Promise<void> {
    await this.client.send(
      new PublishCommand({
        TopicArn: this.topicArn,
        // SNS subjects are at most 100 characters; workspace ids are short.
        Subject: `Sluice ${notice.stage}: low credit for workspace ${notice.workspaceId}`.slice(0, 100),
        Message: [
          `Workspace ${notice.workspaceId} has ${formatMinor(notice.availableMicros)} minor units available,`,
          `below its low-credit threshold of ${formatMinor(notice.thresholdMicros)}.`,
          `This notice is sent once per crossing (${notice.crossingId}); the next one comes after the balance rises above the threshold and falls below it again.`,
          '',
          JSON.stringify(noticeDetail(notice)),
        ].join('\n'),
        MessageAttributes: {
          event: { DataType: 'String', StringValue: 'low_credit' },
          workspaceId: { DataType: 'String', StringValue: notice.workspaceId },
        },
      }),
    );
  }
}

/**
 * The notice's channels: the primary (EventBridge) decides whether the notice went out, and a
 * failure there clears the crossing so the next run retries; the others (SNS) are told after it,
 * and a failure of theirs is reported but not retried, since retrying would publish the primary
 * event a second time for the same crossing.
 */
export class NoticeChannels implements NoticePublisher {
  constructor(
    private readonly primary: NoticePublisher,
    private readonly others: readonly NoticePublisher[],
    private readonly onSecondaryFailure: (err: unknown) => void,
  ) {}

  async publish(notice: LowCreditNotice): Promise<void> {
    await this.primary.publish(notice);
    const results = await Promise.allSettled(this.others.map((p) => p.publish(notice)));
    for (const r of results) if (r.status === 'rejected') this.onSecondaryFailure(r.reason);
  }
}

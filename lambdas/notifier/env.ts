/** Environment the notifier needs beyond the shared configuration (`lambdas/shared/config.ts`); CDK sets it. */
export const NOTIFIER_ENV = {
  /** ARN of the stage's SNS topic; unset publishes to EventBridge only. */
  topicArn: 'SLUICE_NOTICE_TOPIC_ARN',
  /** EventBridge bus the notice goes to. @default 'default' */
  eventBusName: 'SLUICE_NOTICE_EVENT_BUS',
} as const;

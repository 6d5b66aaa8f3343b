/**
 * The store: one home for the ledger's key layout, its item builders and every condition the
 * ledger, holds and usage rows are written with. Other modules write through these exports.
 */
export { DynamoLedger, LedgerContentionError, type LedgerTables } from './ledger';
export { creditWorkspace, readBalance, setLedgerSlices, usageRowByRequest, usageRows, LedgerNotFoundError, type BalanceSummary } from './balance';
export { scanExpiryIndex, type ExpiryScan } from './holds';
export * from './keys';

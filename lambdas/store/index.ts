/**
 * The store: one home for the ledger's key layout, its item builders and every condition the
 * ledger and requests' rows (a hold while open, a usage row once settled) are written with. Other
 * modules write through these exports.
 */
export { DynamoLedger, LedgerContentionError, type LedgerTables } from './ledger';
export { creditWorkspace, readBalance, setLedgerSlices, usageRowByRequest, usageRows, LedgerNotFoundError, type BalanceSummary } from './balance';
export { scanExpiryIndex, type ExpiryScan } from './holds';
export { holdOfRow, isOpenRow, isSettledRow, readRequestRow, type StoredHold } from './request-rows';
export * from './keys';

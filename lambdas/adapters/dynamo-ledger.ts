/**
 * The DynamoDB ledger lives in the store module (`lambdas/store/`), which owns every key and
 * condition; this path stays so the functions' wiring keeps its import.
 */
export { DynamoLedger, LedgerContentionError, type LedgerTables } from '../store/ledger';

/**
 * The operator's use cases called in process, for local mode's seeding, the tests and the
 * benchmarks: the store's directory, the balance port's credit, and the catalog files. The
 * operator's own path is the management API (`lambdas/admin/`), which the CLI calls.
 */
export * from '../lambdas/store/directory';
export { addCredit } from '../lambdas/store/balance-port';
export { importCatalog } from './import-catalog';
export { loadCatalogFiles } from './import-catalog';

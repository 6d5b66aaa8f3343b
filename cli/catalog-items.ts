/** The catalog's item layout and validation live with the runtime (`lambdas/catalog/`); the CLI uses them from there. */
export * from '../lambdas/catalog/items';

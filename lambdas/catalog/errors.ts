/** Errors of the catalog's validation, shared by the deploy-time import and the operator CLI. */

/** A catalog or provider entry failed validation; the message names the file and the entry. */
export class CatalogValidationError extends Error {
  /** Stable code the CLI prints. */
  readonly code = 'catalog_invalid';

  constructor(message: string) {
    super(message);
    this.name = 'CatalogValidationError';
  }
}

/** A string is not a provider-pinned model id `<provider>/<model>`. */
export class InvalidPinnedIdError extends Error {
  override readonly name = 'InvalidPinnedIdError';
}

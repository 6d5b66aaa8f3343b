import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { CustomResource, Duration } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { REPO_ROOT } from './provider-file';
import { SluiceFunction } from './sluice-function';
import type { StageSettings } from './stage';
import type { TableSet } from './tables';

/** Properties of {@link CatalogImport}. */
export interface CatalogImportProps {
  /** The stage's settings. */
  readonly stage: StageSettings;
  /** The stage's tables; the import writes only the catalog table. */
  readonly tables: TableSet;
}

/**
 * Imports `config/providers.json` and `config/catalog.json` into the catalog table on deploy,
 * through a custom resource whose properties carry a hash of both files: a deploy that changes
 * the catalog re-imports it, one that does not leaves it alone. The files are bundled into the
 * function, so what is imported is exactly what was reviewed in the repository.
 */
export class CatalogImport extends Construct {
  /** Hash of the catalog files this deploy imports. */
  public readonly catalogHash: string;

  public constructor(scope: Construct, id: string, props: CatalogImportProps) {
    super(scope, id);
    const hash = createHash('sha256');
    for (const file of ['config/providers.json', 'config/catalog.json']) hash.update(readFileSync(path.join(REPO_ROOT, file)));
    this.catalogHash = hash.digest('hex');

    const fn = new SluiceFunction(this, 'Import', {
      stage: props.stage,
      entry: 'lambdas/catalog-import/handler.ts',
      description: `Sluice ${props.stage.name}: import the catalog on deploy`,
      memoryMb: 256,
      timeout: Duration.minutes(2),
    }).fn;
    props.tables.table('catalog').grantReadWriteData(fn);
    // The function answers CloudFormation itself, so it is the service token.
    new CustomResource(this, 'Catalog', {
      serviceToken: fn.functionArn,
      resourceType: 'Custom::SluiceCatalog',
      properties: { CatalogHash: this.catalogHash },
    });
  }
}

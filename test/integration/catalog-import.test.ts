/**
 * The deploy-time catalog import on DynamoDB Local: a Create writes the bundled catalog exactly as
 * `sluice catalog import` reads it, an Update re-imports idempotently, Delete leaves the table
 * alone, and the result reaches CloudFormation's response URL.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CloudFormationCustomResourceEvent, Context } from 'aws-lambda';
import { loadCatalogFiles, readCatalog } from '../../local/ops';
import { testTables, type TestTables } from '../support/dynamo';

let tables: TestTables;
let mod: typeof import('../../lambdas/catalog-import/handler');

beforeAll(async () => {
  tables = await testTables();
  process.env.SLUICE_STAGE = 'dev';
  process.env.SLUICE_TABLE_PREFIX = tables.prefix;
  process.env.SLUICE_DYNAMODB_ENDPOINT = tables.endpoint;
  mod = await import('../../lambdas/catalog-import/handler');
});
afterAll(() => tables.client.destroy());

function event(type: 'Create' | 'Update' | 'Delete', responseUrl = 'https://example.invalid/'): CloudFormationCustomResourceEvent {
  const common = {
    ServiceToken: 'arn:aws:lambda:eu-west-1:123456789012:function:x',
    ResponseURL: responseUrl,
    StackId: 'arn:aws:cloudformation:eu-west-1:123456789012:stack/Sluice-dev/1',
    RequestId: 'req-1',
    LogicalResourceId: 'Catalog',
    ResourceType: 'Custom::SluiceCatalog',
    ResourceProperties: { ServiceToken: 'x', CatalogHash: 'h' },
  };
  if (type === 'Create') return { ...common, RequestType: 'Create' };
  if (type === 'Update') return { ...common, RequestType: 'Update', PhysicalResourceId: 'sluice-catalog-dev', OldResourceProperties: { ServiceToken: 'x' } };
  return { ...common, RequestType: 'Delete', PhysicalResourceId: 'sluice-catalog-dev' };
}

it('imports the bundled catalog on Create and Update, and leaves it on Delete', async () => {
  const ctx = { doc: tables.doc, tablePrefix: tables.prefix, stage: 'dev' };
  const created = await mod.importForEvent(event('Create'), 'stream');
  const files = loadCatalogFiles();
  expect(created).toMatchObject({ Status: 'SUCCESS', PhysicalResourceId: 'sluice-catalog-dev', Data: { providers: files.providers.length, models: files.models.length } });
  const stored = await readCatalog(ctx);
  expect(stored.models.map((m) => m.id).sort()).toEqual(files.models.map((m) => m.id).sort());
  expect(await mod.importForEvent(event('Update'), 'stream')).toMatchObject({ Status: 'SUCCESS' });
  expect((await readCatalog(ctx)).models).toHaveLength(files.models.length);
  expect(await mod.importForEvent(event('Delete'), 'stream')).toMatchObject({ Status: 'SUCCESS' });
  expect((await readCatalog(ctx)).models).toHaveLength(files.models.length);
});

it('PUTs the response to the pre-signed URL', async () => {
  let received = '';
  let method = '';
  const server = createServer((req, res) => {
    method = req.method ?? '';
    req.on('data', (c: Buffer) => (received += c.toString()));
    req.on('end', () => res.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  try {
    await mod.handler(event('Update', `http://127.0.0.1:${port}/presigned`), { logStreamName: 'stream' } as Context);
  } finally {
    server.close();
  }
  expect(method).toBe('PUT');
  expect(JSON.parse(received)).toMatchObject({ Status: 'SUCCESS', PhysicalResourceId: 'sluice-catalog-dev', RequestId: 'req-1', LogicalResourceId: 'Catalog' });
});

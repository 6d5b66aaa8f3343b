/**
 * Deploy-time catalog import: a CloudFormation custom resource that writes the catalog bundled
 * from `config/` into the stage's catalog table, validated exactly as `sluice catalog import`
 * does, on every deploy that changes it, never removing what operators added at run time. Deleting the stack leaves the table to its own policy.
 *
 * The function answers CloudFormation itself (a PUT of the result to the pre-signed response
 * URL), so no provider-framework function of CDK's own runtime choosing joins the stack.
 */
import http from 'node:http';
import https from 'node:https';
import type { CloudFormationCustomResourceEvent, Context } from 'aws-lambda';
import providers from '../../config/providers.json';
import models from '../../config/catalog.json';
import middy from '@middy/core';
import { documentClient } from '../adapters/dynamo-client';
import { parseCatalogEntries, writeCatalogEntries } from '../catalog/import';
import { loadConfig } from '../shared/config';
import { tableName } from '../shared/schema';

const config = loadConfig();
const doc = documentClient(config);

/** The response CloudFormation expects at the event's ResponseURL. */
export interface CustomResourceResponse {
  readonly Status: 'SUCCESS' | 'FAILED';
  readonly Reason?: string;
  readonly PhysicalResourceId: string;
  readonly StackId: string;
  readonly RequestId: string;
  readonly LogicalResourceId: string;
  readonly Data?: Readonly<Record<string, number>>;
}

/** Imports (on Create and Update) and builds the response; never throws. */
export async function importForEvent(event: CloudFormationCustomResourceEvent, logStream: string): Promise<CustomResourceResponse> {
  const base = {
    PhysicalResourceId: `sluice-catalog-${config.stage}`,
    StackId: event.StackId,
    RequestId: event.RequestId,
    LogicalResourceId: event.LogicalResourceId,
  };
  if (event.RequestType === 'Delete') return { ...base, Status: 'SUCCESS' };
  try {
    const entries = parseCatalogEntries(providers as unknown[], models as unknown[]);
    // Never pruned: a deploy keeps the providers and models operators added at run time. What
    // the table holds beyond the files is named in the log; `sluice catalog import --prune` removes it.
    const result = await writeCatalogEntries({ doc, tableName: tableName(config.tablePrefix, 'catalog') }, entries);
    console.log(
      JSON.stringify({
        event: 'catalog_import',
        stage: config.stage,
        providers: result.providers,
        models: result.models,
        unlistedProviders: result.unlisted.providers,
        unlistedModels: result.unlisted.models,
      }),
    );
    return { ...base, Status: 'SUCCESS', Data: { providers: result.providers, models: result.models } };
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    console.error(JSON.stringify({ event: 'catalog_import_failed', stage: config.stage, reason }));
    return { ...base, Status: 'FAILED', Reason: `${reason} (log stream ${logStream})`.slice(0, 1000) };
  }
}

function put(url: string, body: string): Promise<void> {
  // CloudFormation's URLs are https; plain http is accepted for tests on loopback.
  const request = new URL(url).protocol === 'http:' ? http.request : https.request;
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'PUT', headers: { 'content-type': '', 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve());
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function respond(event: CloudFormationCustomResourceEvent, context: Pick<Context, 'logStreamName'>): Promise<void> {
  const response = await importForEvent(event, context.logStreamName);
  await put(event.ResponseURL, JSON.stringify(response));
}

/** The custom resource's Lambda handler, a `@middy/core` handler. */
export const handler = middy(respond) as unknown as (event: CloudFormationCustomResourceEvent, context: Pick<Context, 'logStreamName'>) => Promise<void>;

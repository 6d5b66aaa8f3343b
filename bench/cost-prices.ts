/**
 * The price book: `bench/aws-prices.json` read and checked. Every price the cost model uses is
 * named here, so a missing or misspelt one fails at load with its name, not as a silent zero; each
 * keeps its source and the date it was read, which the report prints beside the figures.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Exact } from './exact';

/** The prices the model multiplies by, in USD per their `per` unit. */
export const PRICE_NAMES = [
  'lambdaArmGbSecond',
  'lambdaRequest',
  'lambdaStreamedGb',
  'managedInstancesFee',
  'dynamoWriteUnit',
  'dynamoReadUnit',
  'dynamoStorageGbMonth',
  'dynamoPitrGbMonth',
  'dynamoStreamsReadByLambda',
  'logsIngestedGb',
  'logsStoredGbMonth',
  'metricMonth',
  'secretsCall',
  'secretMonth',
  'natGatewayHour',
  'natGatewayGb',
  'publicIpv4Hour',
  'interAzGb',
  'transferOutGb',
  // Two regions or more (docs/cost.md "Two regions").
  'dynamoReplicatedWriteUnit',
  'interRegionGb',
  'cloudfrontHttpsRequest',
  'cloudfrontFunctionInvocation',
  'cloudfrontKvsRead',
  'cloudfrontTransferOutGb',
  'cloudfrontToOriginGb',
] as const;

/** A named price. EC2 instance-hours are separate (`ec2Hour.<type>`), one per instance type. */
export type PriceName = (typeof PRICE_NAMES)[number];

/** The published limits the model relies on. */
export const LIMIT_NAMES = ['lambdaMbPerVcpu', 'managedMinEnvironments', 'managedMinFunctionGb', 'managedNodeConcurrencyPerVcpu', 'streamPollsPerSecond', 'streamingFreeBytesPerRequest'] as const;

export type LimitName = (typeof LIMIT_NAMES)[number];

/** One price or limit as the book holds it. */
export interface Sourced {
  readonly value: Exact;
  readonly source: string;
  /** ISO date the source was read. */
  readonly read: string;
}

/** An EC2 instance type Lambda Managed Instances may run, with its size. */
export interface InstanceType extends Sourced {
  readonly name: string;
  readonly vcpus: number;
  readonly memoryGib: number;
}

/** The whole book, checked. */
export interface PriceBook {
  readonly region: string;
  readonly prices: Readonly<Record<PriceName, Sourced>>;
  readonly limits: Readonly<Record<LimitName, Sourced>>;
  readonly instances: readonly InstanceType[];
}

/** Thrown for a price book that lacks a price or holds a malformed one. */
export class PriceBookError extends Error {
  override readonly name = 'PriceBookError';
}

/** The instance types the book may price, with their published sizes (vCPU, GiB). */
const INSTANCE_SIZES: Readonly<Record<string, { vcpus: number; memoryGib: number }>> = {
  'c7g.large': { vcpus: 2, memoryGib: 4 },
  'c7g.xlarge': { vcpus: 4, memoryGib: 8 },
  'm7g.large': { vcpus: 2, memoryGib: 8 },
  'm7g.xlarge': { vcpus: 4, memoryGib: 16 },
};

const DATE = /^\d{4}-\d{2}-\d{2}$/;

function entry(where: string, raw: unknown, field: 'usd' | 'value'): Sourced {
  if (raw === null || typeof raw !== 'object') throw new PriceBookError(`${where} is missing`);
  const r = raw as Record<string, unknown>;
  const text = r[field];
  if (typeof text !== 'string') throw new PriceBookError(`${where}.${field} must be a decimal string`);
  let value: Exact;
  try {
    value = Exact.of(text);
  } catch {
    throw new PriceBookError(`${where}.${field} is not a decimal: ${JSON.stringify(text)}`);
  }
  if (value.lt(Exact.ZERO)) throw new PriceBookError(`${where}.${field} is negative`);
  if (typeof r.source !== 'string' || r.source.trim() === '') throw new PriceBookError(`${where}.source is missing`);
  if (typeof r.read !== 'string' || !DATE.test(r.read)) throw new PriceBookError(`${where}.read must be a date (YYYY-MM-DD)`);
  return { value, source: r.source, read: r.read };
}

/** Checks a parsed price book; throws {@link PriceBookError} on the first problem. */
export function parsePriceBook(json: unknown): PriceBook {
  if (json === null || typeof json !== 'object') throw new PriceBookError('the price book is not an object');
  const book = json as Record<string, unknown>;
  const prices = (book.prices ?? {}) as Record<string, unknown>;
  const limits = (book.limits ?? {}) as Record<string, unknown>;
  const named = Object.fromEntries(PRICE_NAMES.map((n) => [n, entry(`prices.${n}`, prices[n], 'usd')])) as Record<PriceName, Sourced>;
  const limitEntries = Object.fromEntries(LIMIT_NAMES.map((n) => [n, entry(`limits.${n}`, limits[n], 'value')])) as Record<LimitName, Sourced>;
  const instances: InstanceType[] = [];
  for (const [key, raw] of Object.entries(prices)) {
    if (!key.startsWith('ec2Hour.')) continue;
    const name = key.slice('ec2Hour.'.length);
    const size = INSTANCE_SIZES[name];
    if (size === undefined) throw new PriceBookError(`prices.${key}: no known size for instance type ${name} (add it to INSTANCE_SIZES in bench/cost-prices.ts)`);
    instances.push({ name, ...size, ...entry(`prices.${key}`, raw, 'usd') });
  }
  if (instances.length === 0) throw new PriceBookError('the price book prices no EC2 instance type (ec2Hour.<type>)');
  return { region: typeof book.region === 'string' ? book.region : 'unknown', prices: named, limits: limitEntries, instances };
}

/** `bench/aws-prices.json`, checked. */
export function loadPriceBook(file = path.join(__dirname, 'aws-prices.json')): PriceBook {
  return parsePriceBook(JSON.parse(readFileSync(file, 'utf8')));
}

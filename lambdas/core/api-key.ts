/**
 * API key format: a prefix (`slc_live_`, `slc_stg_`, `slc_dev_`) followed by 43 base64url
 * characters (32 random bytes). Only the SHA-256 of the whole key is stored, plus the visible
 * part (prefix and last four characters).
 */
import { createHash, randomBytes } from 'node:crypto';

export const KEY_PREFIXES = ['slc_live_', 'slc_stg_', 'slc_dev_'] as const;
export type KeyPrefix = (typeof KEY_PREFIXES)[number];

const KEY_SHAPE = /^slc_(?:live|stg|dev)_[A-Za-z0-9_-]{43}$/;

/** Whether a string has the shape of a Sluice key; nothing is looked up. */
export function isKeyShaped(candidate: string): boolean {
  return KEY_SHAPE.test(candidate);
}

/** SHA-256 hex of the raw key: the only form in which a key is stored or looked up. */
export function hashKey(rawKey: string): string {
  return createHash('sha256').update(rawKey, 'utf8').digest('hex');
}

/** Prefix and last four characters: the part that stays visible after creation. */
export function visiblePart(rawKey: string): string {
  const prefix = KEY_PREFIXES.find((p) => rawKey.startsWith(p)) ?? '';
  return `${prefix}…${rawKey.slice(-4)}`;
}

/** Mints a new raw key; the caller shows it once and keeps only `hashKey` of it. */
export function mintKey(prefix: KeyPrefix, random: (n: number) => Buffer = randomBytes): string {
  return prefix + random(32).toString('base64url');
}

/** The key prefix a stage mints. */
export function prefixForStage(stage: string): KeyPrefix {
  if (stage === 'prod') return 'slc_live_';
  if (stage === 'stg') return 'slc_stg_';
  return 'slc_dev_';
}

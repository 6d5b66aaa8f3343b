/**
 * The browser bundle when deployed: `console.js` and `console.css` in a folder beside the
 * handler (`console-assets/`, put there by the function's bundling), read once and kept.
 * Local mode builds the same files with esbuild instead (`local/console-assets.ts`).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ConsoleAsset, ConsoleAssets } from './ports';

/** The files the pages load, with their content types. */
export const CONSOLE_ASSET_TYPES: Readonly<Record<string, string>> = {
  'console.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
};

/** Assets read from a folder, each once. */
export class FolderAssets implements ConsoleAssets {
  private readonly cache = new Map<string, Promise<ConsoleAsset | undefined>>();

  constructor(private readonly dir: string) {}

  get(name: string): Promise<ConsoleAsset | undefined> {
    const contentType = CONSOLE_ASSET_TYPES[name];
    if (contentType === undefined) return Promise.resolve(undefined);
    let hit = this.cache.get(name);
    if (hit === undefined) {
      hit = readFile(join(this.dir, name), 'utf8').then(
        (body) => ({ contentType, body }),
        () => undefined,
      );
      this.cache.set(name, hit);
    }
    return hit;
  }
}

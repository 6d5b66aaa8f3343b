/**
 * The console's browser bundle, built with esbuild: `console.js` (the page script with
 * `@simplewebauthn/browser` and uPlot) and `console.css` (uPlot's styles and the console's).
 * Local mode and the tests serve it from memory; the deployed function's bundling writes it
 * beside the handler: `npx tsx local/console-assets.ts <folder>`.
 */
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { CONSOLE_ASSET_TYPES } from '../lambdas/console/assets';
import type { ConsoleAsset, ConsoleAssets } from '../lambdas/console/ports';

const CLIENT_DIR = resolve(__dirname, '../lambdas/console/client');

/** Builds the two files' contents. */
export async function buildConsoleBundle(): Promise<Record<string, string>> {
  const out = await build({
    entryPoints: [join(CLIENT_DIR, 'console.ts')],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: ['chrome110', 'firefox110', 'safari16'],
    minify: true,
    write: false,
    legalComments: 'none',
  });
  const js = out.outputFiles[0]?.text ?? '';
  const uplotCss = readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8');
  const css = `${uplotCss}\n${readFileSync(join(CLIENT_DIR, 'console.css'), 'utf8')}`;
  return { 'console.js': js, 'console.css': css };
}

/** The bundle as a {@link ConsoleAssets}, built once on first use. */
export function memoryAssets(): ConsoleAssets {
  let built: Promise<Record<string, string>> | undefined;
  return {
    async get(name: string): Promise<ConsoleAsset | undefined> {
      const contentType = CONSOLE_ASSET_TYPES[name];
      if (contentType === undefined) return undefined;
      built ??= buildConsoleBundle();
      const body = (await built)[name];
      return body === undefined ? undefined : { contentType, body };
    },
  };
}

/** Writes the bundle into a folder (the deployed function's `console-assets/`). */
export async function writeConsoleBundle(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [name, body] of Object.entries(await buildConsoleBundle())) await writeFile(join(dir, name), body);
}

if (require.main === module) {
  const dir = process.argv[2];
  if (dir === undefined) {
    console.error('usage: tsx local/console-assets.ts <folder>');
    process.exit(2);
  }
  void writeConsoleBundle(dir).then(
    () => console.log(`console bundle written to ${dir}`),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}

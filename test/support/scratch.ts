/**
 * Temporary folders a test file removes when it ends. Call `scratchDirs()` once at the file's top
 * level (it registers the clean-up); each call of what it returns makes a fresh folder under the
 * system's temporary folder, inside a test or outside one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export function scratchDirs(): (prefix: string) => string {
  const made: string[] = [];
  afterAll(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return (prefix) => {
    const dir = mkdtempSync(path.join(tmpdir(), prefix));
    made.push(dir);
    return dir;
  };
}

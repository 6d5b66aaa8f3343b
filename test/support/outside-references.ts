/**
 * Finds references in the repository's files that climb out of the repository root: a relative
 * path that goes up three levels from `test/support/` into a sibling `shared/` folder, or a
 * Markdown link one level up from the root. A clone of the repository alone has nothing beside it,
 * so any such reference is a test that fails or a link that is dead for every newcomer.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** One reference that leaves the repository. */
export interface OutsideReference {
  readonly file: string;
  readonly line: number;
  readonly text: string;
}

/** A run of `../` followed by a path character (so `'../'` in a string of its own is not a path). */
const CLIMB = /((?:\.\.\/)+)[\w.-]/g;

/**
 * The references in `text` (the contents of `file`, a path relative to the repository root) whose
 * climbing prefix leads above the root.
 */
export function outsideReferences(file: string, text: string): OutsideReference[] {
  const found: OutsideReference[] = [];
  const dir = path.posix.dirname(file);
  text.split('\n').forEach((line, index) => {
    for (const match of line.matchAll(CLIMB)) {
      const target = path.posix.normalize(path.posix.join(dir, match[1] as string));
      if (target === '..' || target.startsWith('../')) {
        found.push({ file, line: index + 1, text: line.trim().slice(0, 160) });
        break;
      }
    }
  });
  return found;
}

/** Files whose contents are not the project's own words or code. */
const IGNORED = /(^|\/)(package-lock\.json|node_modules\/)/;

/** Every tracked file's outside references, read from the working tree. */
export function trackedOutsideReferences(root: string): OutsideReference[] {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter((f) => f !== '' && !IGNORED.test(f));
  const found: OutsideReference[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = fs.readFileSync(path.join(root, file), 'utf8');
    } catch {
      continue; // Deleted in the working tree but still tracked.
    }
    if (text.includes('\0')) continue; // Binary.
    found.push(...outsideReferences(file, text));
  }
  return found;
}

/** One Markdown link that does not resolve inside the repository. */
export interface BrokenLink {
  readonly file: string;
  readonly target: string;
  readonly reason: string;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let inFence = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) inFence = !inFence;
    const m = inFence ? null : /^#{1,6} (.*)$/.exec(line);
    if (m !== null) anchors.add(headingAnchor(m[1] as string));
  }
  return anchors;
}

/**
 * Every relative link in the tracked Markdown files whose target file (or heading anchor) does
 * not exist inside the repository. Links to other sites are not followed.
 */
export function brokenMarkdownLinks(root: string): BrokenLink[] {
  const files = execFileSync('git', ['ls-files', '-z', '*.md'], { cwd: root, encoding: 'utf8' }).split('\0').filter((f) => f !== '' && !IGNORED.test(f));
  const broken: BrokenLink[] = [];
  for (const file of files) {
    const text = fs.readFileSync(path.join(root, file), 'utf8').replace(/```[\s\S]*?```/g, '');
    for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1] as string;
      if (/^[a-z]+:/i.test(target)) continue;
      const [pathPart = '', anchor] = target.split('#');
      const resolved = pathPart === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), pathPart));
      if (resolved === '..' || resolved.startsWith('../')) {
        broken.push({ file, target, reason: 'outside the repository' });
        continue;
      }
      const absolute = path.join(root, resolved);
      if (!fs.existsSync(absolute)) {
        broken.push({ file, target, reason: 'no such file' });
        continue;
      }
      if (anchor !== undefined && anchor !== '' && resolved.endsWith('.md') && !anchorsOf(fs.readFileSync(absolute, 'utf8')).has(anchor)) {
        broken.push({ file, target, reason: 'no such heading' });
      }
    }
  }
  return broken;
}

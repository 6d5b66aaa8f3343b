/**
 * The repository stands alone: no tracked file reads or links a path outside it. A clone from a
 * public host has no sibling folders, so such a reference is a red test or a dead link there.
 */
import path from 'node:path';
import { brokenMarkdownLinks, headingAnchor, outsideReferences, trackedOutsideReferences } from '../support/outside-references';

// Built at run time so that this file does not itself contain the references it plants.
const up = (n: number): string => '../'.repeat(n);

describe('outsideReferences', () => {
  it.each([
    ['a read three levels up from test/support', 'test/support/openapi.ts', `const p = path.resolve(__dirname, '${up(3)}shared/openai-openapi.json');`],
    ['a Markdown link to a sibling folder from the root', 'README.md', `The contract is [SPEC](${up(1)}shared/SPEC.md).`],
    ['an import one level too far', 'lambdas/core/errors.ts', `import x from '${up(3)}outside/x';`],
    ['a link from docs/ to a sibling folder', 'docs/api.md', `see ${up(2)}shared/DESIGN.md`],
  ])('finds %s', (_name, file, text) => {
    expect(outsideReferences(file, text)).toEqual([{ file, line: 1, text }]);
  });

  it.each([
    ['the project\'s own lambdas/shared from test/', 'test/unit/x.test.ts', `import { TABLES } from '${up(2)}lambdas/shared/schema';`],
    ['a link from docs/ back to the README', 'docs/api.md', `[README](${up(1)}README.md)`],
    ['a path that climbs and comes back inside', 'test/support/a.ts', `require('${up(2)}local/tables')`],
    ['a bare "../" with no path after it', 'bench/run.ts', "const parent = '../';"],
  ])('leaves alone %s', (_name, file, text) => {
    expect(outsideReferences(file, text)).toEqual([]);
  });

  it('reports the line of each reference', () => {
    const text = ['ok', `see ${up(1)}shared/SPEC.md`, 'ok'].join('\n');
    expect(outsideReferences('README.md', text).map((r) => r.line)).toEqual([2]);
  });
});

describe('headingAnchor', () => {
  it.each([
    ['The operator CLI: `sluice`', 'the-operator-cli-sluice'],
    ['Choices where the wire format is silent', 'choices-where-the-wire-format-is-silent'],
    ["The operator's day", 'the-operators-day'],
  ])('%s → %s', (heading, anchor) => {
    expect(headingAnchor(heading)).toBe(anchor);
  });
});

describe('the repository', () => {
  const root = path.resolve(__dirname, '../..');

  it('has no tracked file that refers to a path outside it', () => {
    expect(trackedOutsideReferences(root)).toEqual([]);
  });

  it('has no Markdown link that fails to resolve inside it (files and headings)', () => {
    expect(brokenMarkdownLinks(root)).toEqual([]);
  });
});

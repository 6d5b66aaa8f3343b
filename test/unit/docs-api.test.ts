/**
 * docs/api.md's error table is the catalog in `lambdas/core/errors.ts` in people's words: every
 * row of the catalog appears there with the same status, code, type and param, and nothing else does.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ERROR_CATALOG } from '../../lambdas/core/errors';

const API = fs.readFileSync(path.resolve(__dirname, '../../docs/api.md'), 'utf8');

/** `null`, or the text between backticks. */
const cell = (text: string): string | null => (text.trim() === 'null' ? null : text.trim().replace(/^`|`$/g, ''));

function documentedRows(): string[] {
  const section = API.split('\n## Errors\n')[1]?.split('\n## ')[0] ?? '';
  return section
    .split('\n')
    .filter((line) => /^\| \d{3} \|/.test(line))
    .map((line) => {
      const [status, code, type, param] = line.split('|').slice(1, 5).map((c) => c.trim());
      return JSON.stringify({ status: Number(status), code: cell(code ?? ''), type: cell(type ?? ''), param: cell(param ?? '') });
    })
    .sort();
}

describe('docs/api.md', () => {
  it('lists exactly the error catalog, status, code, type and param', () => {
    const catalog = Object.entries(ERROR_CATALOG)
      // A relayed provider refusal takes the provider's status and fields; the docs give it its own row.
      .filter(([kind]) => kind !== 'provider_refusal')
      .map(([, row]) => JSON.stringify({ status: row.status, code: row.code, type: row.type, param: row.param }))
      .sort();
    expect(documentedRows()).toEqual(catalog);
  });
});

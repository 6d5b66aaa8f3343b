import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadProviderKeySources, ProviderFileError } from '../../lib/provider-file';
import { providerSecretName } from '../../lib/secrets';

describe('loadProviderKeySources', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-providers-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, body: string): string => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, body);
    return file;
  };

  it('yields no providers when the file is absent', () => {
    expect(loadProviderKeySources(path.join(dir, 'missing.json'))).toEqual([]);
  });

  it('reads an array of providers', () => {
    const file = write(
      'array.json',
      JSON.stringify([
        { name: 'openai', displayName: 'OpenAI', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } },
        { name: 'local', keySource: 'none' },
      ]),
    );
    expect(loadProviderKeySources(file)).toEqual([
      { name: 'openai', keySource: { secretName: 'sluice/{stage}/providers/openai', env: 'OPENAI_API_KEY' } },
      { name: 'local', keySource: 'none' },
    ]);
  });

  it('reads the providers of a catalog file', () => {
    const file = write('catalog.json', JSON.stringify({ providers: [{ name: 'local', keySource: 'none' }], models: [] }));
    expect(loadProviderKeySources(file)).toEqual([{ name: 'local', keySource: 'none' }]);
  });

  it.each([
    ['not JSON', '{'],
    ['not a list', '{"name":"x"}'],
    ['a provider without a name', '[{"keySource":"none"}]'],
    ['a key source without a secret name', '[{"name":"x","keySource":{"env":"X"}}]'],
  ])('refuses a file that is %s', (_label, body) => {
    expect(() => loadProviderKeySources(write('bad.json', body))).toThrow(ProviderFileError);
  });
});

describe('providerSecretName', () => {
  it('replaces every {stage}', () => {
    expect(providerSecretName('sluice/{stage}/providers/{stage}-openai', 'stg')).toBe('sluice/stg/providers/stg-openai');
  });
});

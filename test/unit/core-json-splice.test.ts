/** Byte-preserving edits of a JSON object's top-level fields. */
import { setTopLevel, topLevelValueRange } from '../../lambdas/core/json-splice';

const valueAt = (text: string, key: string): string | undefined => {
  const r = topLevelValueRange(text, key);
  return r === undefined ? undefined : text.slice(r[0], r[1]);
};

describe('topLevelValueRange', () => {
  test.each<[string, string, string, string | undefined]>([
    ['simple string', '{"model":"a/b","x":1}', 'model', '"a/b"'],
    ['number', '{"a":1,"max_tokens":12345}', 'max_tokens', '12345'],
    ['number before the close', '{"n":-1.5e+3}', 'n', '-1.5e+3'],
    ['literal', '{"stream":true,"b":null}', 'stream', 'true'],
    ['null', '{"stream":true,"b":null}', 'b', 'null'],
    ['object', '{"stream_options":{"a":[1,{"b":"}"}]},"z":0}', 'stream_options', '{"a":[1,{"b":"}"}]}'],
    ['array', '{"messages":[{"model":"x"}, "]"],"model":"m"}', 'messages', '[{"model":"x"}, "]"]'],
    ['absent', '{"messages":[{"model":"x"}]}', 'model', undefined],
    ['nested only', '{"a":{"model":"x"},"b":[{"model":"y"}]}', 'model', undefined],
    ['escaped quotes and braces in strings', '{"s":"he said \\"}{\\" \\\\","model":"m"}', 'model', '"m"'],
    ['key spelled with an escape', '{"mod\\u0065l":"m"}', 'model', '"m"'],
    ['whitespace everywhere', ' \n{ "a" : 1 ,\r\n\t"model"  :  "m" \n}\n', 'model', '"m"'],
    ['duplicate keys: last wins', '{"model":"first","x":1,"model":"last"}', 'model', '"last"'],
    ['empty object', '{}', 'model', undefined],
    ['empty object with spaces', '{ }', 'model', undefined],
    ['not an object', '[{"model":"x"}]', 'model', undefined],
  ])('%s', (_l, text, key, expected) => {
    expect(valueAt(text, key)).toBe(expected);
  });

  test('the duplicate chosen is the one JSON.parse keeps', () => {
    const text = '{"model":"first","model":"last"}';
    expect(JSON.parse(valueAt(text, 'model') as string)).toBe((JSON.parse(text) as { model: string }).model);
  });
});

describe('setTopLevel', () => {
  interface Case {
    readonly label: string;
    readonly text: string;
    readonly key: string;
    readonly json: string;
    readonly expectedText: string;
  }
  const cases: readonly Case[] = [
    {
      label: 'replaces the top-level model only, not the nested ones',
      text: '{"model":"profile/x","messages":[{"role":"user","content":"hi","model":"keep"}],"metadata":{"model":"keep2"}}',
      key: 'model',
      json: '"gpt-4.1"',
      expectedText: '{"model":"gpt-4.1","messages":[{"role":"user","content":"hi","model":"keep"}],"metadata":{"model":"keep2"}}',
    },
    {
      label: 'top-level model after a nested one',
      text: '{"messages":[{"model":"keep"}],"model":"p/m"}',
      key: 'model',
      json: '"m"',
      expectedText: '{"messages":[{"model":"keep"}],"model":"m"}',
    },
    {
      label: 'strings holding escaped quotes, braces and a fake key',
      text: '{"messages":[{"content":"\\"model\\":\\"x\\"} { [ ] \\\\"}],"model":"a/b"}',
      key: 'model',
      json: '"b"',
      expectedText: '{"messages":[{"content":"\\"model\\":\\"x\\"} { [ ] \\\\"}],"model":"b"}',
    },
    {
      label: 'whitespace preserved around the value',
      text: '{\n  "model" :  "a/b" ,\n  "stream": true\n}\n',
      key: 'model',
      json: '"b"',
      expectedText: '{\n  "model" :  "b" ,\n  "stream": true\n}\n',
    },
    {
      label: 'appends to {}',
      text: '{}',
      key: 'max_tokens',
      json: '4096',
      expectedText: '{"max_tokens":4096}',
    },
    {
      label: 'appends to an object with trailing whitespace',
      text: '{"model":"m","messages":[]}  \n',
      key: 'max_tokens',
      json: '4096',
      expectedText: '{"model":"m","messages":[],"max_tokens":4096}  \n',
    },
    {
      label: 'appends to an object with whitespace before the close',
      text: '{\n  "model": "m"\n}',
      key: 'max_tokens',
      json: '8',
      expectedText: '{\n  "model": "m","max_tokens":8}',
    },
    {
      label: 'duplicate keys: every one is replaced, whichever a parser keeps',
      text: '{"model":"a","x":1,"model":"b"}',
      key: 'model',
      json: '"c"',
      expectedText: '{"model":"c","x":1,"model":"c"}',
    },
    {
      label: 'replaces an object value with a longer one',
      text: '{"stream":true,"stream_options":{"x":1},"n":2}',
      key: 'stream_options',
      json: '{"x":1,"include_usage":true}',
      expectedText: '{"stream":true,"stream_options":{"x":1,"include_usage":true},"n":2}',
    },
  ];

  test.each(cases.map((c) => [c.label, c] as const))('%s', (_l, c) => {
    const out = setTopLevel(c.text, c.key, c.json);
    expect(out).toBe(c.expectedText);
    const parsed = JSON.parse(out) as Record<string, unknown>;
    expect(parsed[c.key]).toEqual(JSON.parse(c.json));
  });

  test('huge integers and number spellings elsewhere survive byte-for-byte', () => {
    const tail = '"seed":123456789012345678901234567890,"temperature":1.0,"top_p":1e0,"logit_bias":{"50256":-100.000}';
    const text = `{"model":"openai/gpt-4.1",${tail}}`;
    const out = setTopLevel(text, 'model', '"gpt-4.1"');
    expect(out).toBe(`{"model":"gpt-4.1",${tail}}`);
    const appended = setTopLevel(text, 'max_tokens', '10');
    expect(appended).toBe(`{"model":"openai/gpt-4.1",${tail},"max_tokens":10}`);
  });

  test('result parses and equals the expected object, over many shapes', () => {
    const bodies: readonly Record<string, unknown>[] = [
      {},
      { model: 'x' },
      { messages: [{ role: 'user', content: 'a "quoted" {brace} \\ back', model: 'nested' }], model: 'p/m' },
      { a: [[[]]], b: { c: { d: 'e}' } }, model: null },
      { unicode: 'héllo 😀 \u2028', n: -1.5, t: false },
    ];
    for (const body of bodies) {
      for (const text of [JSON.stringify(body), JSON.stringify(body, null, 2), ` ${JSON.stringify(body, null, '\t')} \n`]) {
        for (const [key, value] of [['model', 'gpt'], ['max_tokens', 99], ['stream_options', { include_usage: true }]] as const) {
          const out = setTopLevel(text, key, JSON.stringify(value));
          expect(JSON.parse(out)).toEqual({ ...body, [key]: value });
        }
      }
    }
  });

  test('every other byte is unchanged when replacing', () => {
    const text = '{ "b" : [1, 2 ,3],  "model"\t:\t"old"  , "c":{"model":"n"} }';
    const out = setTopLevel(text, 'model', '"new-longer-id"');
    const r = topLevelValueRange(text, 'model') as readonly [number, number];
    expect(out.slice(0, r[0])).toBe(text.slice(0, r[0]));
    expect(out.slice(r[0] + '"new-longer-id"'.length)).toBe(text.slice(r[1]));
  });
});

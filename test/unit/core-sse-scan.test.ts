/**
 * The relay's quick scan (`lambdas/core/sse-scan.ts`): it spares the common frame a decode and a
 * `JSON.parse`, and must never change what the relay does. The oracle is the relay as it was
 * before the scan (`test/support/reference-sse-relay.ts`); both are fed the same bytes, realistic
 * frames and every one-byte damage to them, whole and split, and must agree on everything.
 */
import { SseRelay, type RelayOptions, type RelayStep } from '../../lambdas/core/sse';
import { FrameScan } from '../../lambdas/core/sse-scan';
import { ReferenceRelay } from '../support/reference-sse-relay';
import { EXHAUSTIVE, sampled } from '../support/exhaustive';

const CHAT: RelayOptions = { family: 'chat_completions', injectedUsage: false };
const CHAT_INJECTED: RelayOptions = { family: 'chat_completions', injectedUsage: true };
const RESPONSES: RelayOptions = { family: 'responses', injectedUsage: false };

const HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1790000000,"model":"gpt-4.1-mini","system_fingerprint":"fp_1","choices":';
const USAGE = '{"prompt_tokens":21,"completion_tokens":9,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":5,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}';
const RUSAGE = '{"input_tokens":40,"input_tokens_details":{"cached_tokens":8},"output_tokens":12,"output_tokens_details":{"reasoning_tokens":4}}';

/** Frames as providers send them, common and odd; each is one frame without its blank line. */
const FRAMES: readonly string[] = [
  // Chat, as sent once usage was asked for (the injected case), and without.
  `data: ${HEAD}[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
  `data: ${HEAD}[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}`,
  `data: ${HEAD}[{"index":0,"delta":{"content":"a \\"quoted\\" \\\\ line\\n\\u00e9\\ud83d\\ude00 /\\/ \\t"},"finish_reason":null}],"usage":null}`,
  `data: ${HEAD}[{"index":0,"delta":{"content":"Héllo 😀 中文 — \\"usage\\":null"},"finish_reason":null}],"usage":null}`,
  `data: ${HEAD}[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"a\\":1,\\"usage\\":null}"}}]},"finish_reason":null}],"usage":null}`,
  `data: ${HEAD}[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
  `data: ${HEAD}[],"usage":${USAGE}}`,
  `data: ${HEAD}[{"index":0,"delta":{"content":"plain"},"finish_reason":null}]}`,
  `data: ${HEAD}[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":${USAGE}}`,
  'data: {"error":{"message":"overloaded","type":"server_error"}}',
  'data: {"id":"x","error":null,"choices":[],"usage":null}',
  'data: [DONE]',
  'data:[DONE]',
  ': keep-alive',
  'data: {"usage":null,"id":"first","choices":[]}',
  'data: {"id":"nested","choices":[{"delta":{},"usage":null}],"usage":null}',
  'data: {"id": "spaced", "choices": [] ,\t"usage" :  null }',
  'data:{"a":-0.5e+10,"b":0,"c":[1,2.25,-3E-2,[],{}],"d":true,"e":false,"f":null,"usage":null}',
  'data:  \t{"id":"blanks"}  ',
  'data: {"\\u0065rror":{"message":"escaped key"}}',
  'data: {"us\\u0061ge":null,"id":"escaped usage"}',
  'data: {"id":"dup","usage":null,"usage":null}',
  'data: {"id":"empty"}',
  'data: {}',
  'event: message\ndata: {"id":"with event","usage":null}',
  'id: 7\ndata: {"id":"with id"}',
  'data: {"id":"two lines",\ndata: "usage":null}',
  'retry: 10',
  // Responses events.
  'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","usage":null}}',
  'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":1,"delta":"Hé😀 \\"type\\":\\"response.completed\\""}',
  `event: response.completed\ndata: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","usage":${RUSAGE}}}`,
  `event: response.incomplete\ndata: {"type":"response.incomplete","response":{"usage":${RUSAGE}}}`,
  'event: response.failed\ndata: {"type":"response.failed","response":{"usage":null}}',
  'event: error\ndata: {"type":"error","code":"server_error","message":"x"}',
  'event: response.output_text.delta\ndata: {"type":"response.done","delta":"type wins over event"}',
  'data: {"type":"response.reasoning.delta","delta":"no event line"}',
  'event: response.output_text.delta\ndata: {"type":5,"delta":"a type that is not a string"}',
  'event: x\ndata: {"type":"response.output_text.d\\u0065lta"}',
  'event: x\ndata: {"type":"a.delta","type":"response.completed"}',
  'event: response.output_text.delta\rdata: {"type":"response.output_text.delta","delta":"bare CR"}',
  'event:error\ndata: {"type":"message"}',
];

/** Bytes worth putting anywhere: JSON's structure, blanks, line breaks, controls, non-ASCII. */
const DAMAGE: readonly number[] = [0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x20, 0x09, 0x0d, 0x0a, 0x00, 0x1f, 0x7f, 0x6e, 0x75, 0x30, 0x2d, 0x2e, 0x65, 0x78, 0xc3, 0xff];

function both(options: RelayOptions): { relay: SseRelay; reference: ReferenceRelay } {
  return { relay: new SseRelay(options), reference: new ReferenceRelay(options) };
}

/** Everything a step and a relay say, in a comparable shape. */
function observed(steps: readonly RelayStep[], relay: SseRelay | ReferenceRelay): unknown {
  return {
    out: Buffer.concat(steps.flatMap((s) => (s.out === undefined ? [] : [s.out]))).toString('latin1'),
    done: steps.map((s) => s.done?.toString('latin1')),
    faults: steps.map((s) => s.fault),
    frames: relay.frames,
    usage: relay.usage,
    ended: relay.ended,
    terminal: relay.terminal,
    fault: relay.fault,
    complete: relay.complete,
  };
}

/** Feeds `pieces` and then ends the stream, on both relays; returns what each did. */
function run(options: RelayOptions, pieces: readonly Buffer[]): { got: unknown; expected: unknown } {
  const { relay, reference } = both(options);
  const got = observed([...pieces.map((p) => relay.push(p)), relay.end()], relay);
  const expected = observed([...pieces.map((p) => reference.push(p)), reference.end()], reference);
  return { got, expected };
}

const withBlank = (frame: string, eol: '\n' | '\r\n'): string => `${frame.replace(/\n/g, eol)}${eol}${eol}`;

/** One damaged position in this many is checked unless SLUICE_EXHAUSTIVE=1 (see test/support/exhaustive.ts). */
const DAMAGE_STRIDE = 8;

describe('the quick scan changes nothing the relay does', () => {
  const follow = Buffer.from(`data: ${HEAD}[{"index":0,"delta":{"content":"next"},"finish_reason":null}],"usage":null}\n\ndata: [DONE]\n\n`);

  test.each([CHAT, CHAT_INJECTED, RESPONSES])('every frame, LF and CRLF, at every split point (%o)', (options) => {
    for (const eol of ['\n', '\r\n'] as const) {
      for (const frame of FRAMES) {
        const input = Buffer.concat([Buffer.from(withBlank(frame, eol)), follow]);
        for (let i = 0; i <= input.length; i += 1) {
          const { got, expected } = run(options, [input.subarray(0, i), input.subarray(i)]);
          expect(got).toEqual(expected);
        }
      }
    }
  });

  test.each([CHAT, CHAT_INJECTED, RESPONSES])('every frame with any one byte replaced, removed or added (%o)', (options) => {
    let cases = 0;
    for (const [round, frame] of FRAMES.entries()) {
      const base = Buffer.from(withBlank(frame, '\n'));
      const body = base.length - 2; // the blank line stays, so each case is still one frame at most
      const variants: Buffer[] = [];
      for (let i = 0; i < body; i += 1) {
        if (!sampled(i, round, DAMAGE_STRIDE)) continue;
        for (const b of DAMAGE) {
          if (base[i] === b) continue;
          const replaced = Buffer.from(base);
          replaced[i] = b;
          variants.push(replaced);
        }
        variants.push(Buffer.concat([base.subarray(0, i), base.subarray(i + 1)]));
        for (const b of [0x22, 0x5c, 0x2c, 0x7d, 0x20]) variants.push(Buffer.concat([base.subarray(0, i), Buffer.from([b]), base.subarray(i)]));
      }
      for (const v of variants) {
        const { got, expected } = run(options, [Buffer.concat([v, follow])]);
        if (JSON.stringify(got) !== JSON.stringify(expected)) {
          // Name the input that differs, for the reader of a failure.
          expect({ input: v.toString('latin1'), got }).toEqual({ input: v.toString('latin1'), got: expected });
        }
        cases += 1;
      }
    }
    // Every position of every frame when exhaustive; one position in DAMAGE_STRIDE otherwise.
    expect(cases).toBeGreaterThan(EXHAUSTIVE ? 50_000 : 50_000 / DAMAGE_STRIDE);
  });

  test('a whole stream in one chunk and one byte at a time', () => {
    const stream = Buffer.from(FRAMES.map((f) => withBlank(f, '\n')).join(''));
    for (const options of [CHAT, CHAT_INJECTED, RESPONSES]) {
      expect(run(options, [stream]).got).toEqual(run(options, [stream]).expected);
      const bytes = [...stream].map((b) => Buffer.from([b]));
      const { got, expected } = run(options, bytes);
      expect(got).toEqual(expected);
    }
  });
});

describe('FrameScan', () => {
  const read = (frame: string): { ok: boolean; scan: FrameScan } => {
    const scan = new FrameScan();
    const buf = Buffer.from(`${frame}\n\n`);
    return { ok: scan.read(buf, 0, buf.length), scan };
  };

  test('answers for the common chat frame and finds the `"usage":null` to strip', () => {
    const frame = `data: ${HEAD}[{"index":0,"delta":{"content":"Hi"}}],"usage":null}`;
    const { ok, scan } = read(frame);
    expect(ok).toBe(true);
    expect(frame.slice(scan.stripFrom, scan.stripTo)).toBe(',"usage":null');
  });

  test('reads a responses event: its event line and its type', () => {
    const { ok, scan } = read('event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"é"}');
    expect(ok).toBe(true);
    expect(scan.event).toBe('response.output_text.delta');
    expect(scan.type).toBe('response.output_text.delta');
    expect(scan.stripFrom).toBe(-1);
  });

  test.each([
    ['usage counts', `data: {"id":"x","usage":${USAGE}}`],
    ['a top-level error, even null', 'data: {"error":null}'],
    ['an escaped top-level key', 'data: {"\\u0069d":"x"}'],
    ['a second usage member anywhere', 'data: {"a":{"usage":null},"usage":null}'],
    ['an escaped type', 'data: {"type":"\\u0061"}'],
    ['two types', 'data: {"type":"a","type":"b"}'],
    ['the end marker', 'data: [DONE]'],
    ['a comment', ': ping'],
    ['two data lines', 'data: {\ndata: }'],
    ['an id line', 'id: 1\ndata: {}'],
    ['invalid JSON', 'data: {"a":01}'],
    ['a raw control character in a string', 'data: {"a":"\u0001"}'],
    ['trailing text', 'data: {} x'],
    ['a line break inside the object', 'data: {"a":\r1}'],
  ])('is not sure about %s', (_label, frame) => {
    expect(read(frame).ok).toBe(false);
  });

  test('is not fooled by bytes past the end it was given', () => {
    const scan = new FrameScan();
    const buf = Buffer.from('data: {"a":  }\n\n');
    expect(scan.read(buf, 0, 'data: {"a": '.length)).toBe(false);
  });
});

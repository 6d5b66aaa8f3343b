/**
 * The simulator as its own process, the way local mode and benchmarks run it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';

const ROOT = path.resolve(__dirname, '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

let child: ChildProcess;
let url: string;

beforeAll(async () => {
  child = spawn(TSX, ['local/simulator/main.ts', '--port', '0', '--key', 'sk-one', '--key', 'sk-two', '--no-record'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stdout = child.stdout;
  if (stdout === null) throw new Error('no stdout');
  url = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`simulator exited with ${String(code)}`)));
  });
}, 20_000);

afterAll(async () => {
  if (child.exitCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
});

it('prints its base URL and serves with the keys it was given', async () => {
  expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  expect((await fetch(`${url}/models`, { headers: { authorization: 'Bearer sk-two' } })).status).toBe(200);
  expect((await fetch(`${url}/models`, { headers: { authorization: 'Bearer sk-three' } })).status).toBe(401);
});

it('takes scripts over the control surface, and records nothing with --no-record', async () => {
  const script = await fetch(new URL('/_sim/script', url), {
    method: 'POST',
    body: JSON.stringify({ model: 'm', behaviors: [{ kind: 'error', status: 418 }] }),
  });
  expect(script.status).toBe(200);
  const res = await fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer sk-one' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });
  expect(res.status).toBe(418);
  expect(await (await fetch(new URL('/_sim/recorded', url))).json()).toEqual([]);
});

it('stops cleanly on SIGTERM', async () => {
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
});

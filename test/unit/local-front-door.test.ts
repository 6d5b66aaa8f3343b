/**
 * The local front door (local/regions/front-door.ts) in front of two small upstream servers
 * standing in for two regions' gateways: bodies both ways, streams relayed chunk by chunk, a
 * region killed and traffic moved after the probes say so, a region coming back.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  afterProbe,
  type FrontDoor,
  type FrontDoorOptions,
  REROUTE_BOUND_MS,
  type RegionHealth,
  regionsFor,
  rerouteBoundMs,
  startFrontDoor,
} from '../../local/regions/front-door';

jest.setTimeout(30_000);

/** A stand-in for one region's gateway. */
interface Upstream {
  readonly name: string;
  url: string;
  port: number;
  /** Status to answer `<METHOD> <path>` with, instead of the usual answer. */
  readonly statusFor: Map<string, number>;
  /** `<METHOD> <path>` never answered (a region that hangs). */
  readonly hang: Set<string>;
  /** Lets `/stream`'s second chunk go. */
  release(): void;
  /** Resolves when a `/stream` request's client went away. */
  streamClosed: Promise<void>;
  kill(): Promise<void>;
  restart(): Promise<void>;
}

async function upstream(name: string, port = 0): Promise<Upstream> {
  let release: () => void = () => undefined;
  let streamClosedResolve: () => void = () => undefined;
  const self: Upstream = {
    name,
    url: '',
    port: 0,
    statusFor: new Map(),
    hang: new Set(),
    release: () => release(),
    streamClosed: new Promise((resolve) => {
      streamClosedResolve = resolve;
    }),
    kill: async () => undefined,
    restart: async () => undefined,
  };
  let server: Server;
  const listen = async (onPort: number): Promise<void> => {
    server = createServer(async (req, res) => {
      if (self.hang.has(`${req.method} ${req.url}`)) return;
      const forced = self.statusFor.get(`${req.method} ${req.url}`);
      if (forced !== undefined) {
        res.writeHead(forced, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `${name} says ${forced}` } }));
        return;
      }
      if (req.url === '/stream') {
        const held = new Promise<void>((resolve) => {
          release = resolve;
        });
        req.socket.on('close', () => streamClosedResolve());
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: first\n\n');
        await held;
        res.write('data: second\n\n');
        res.end('data: [DONE]\n\n');
        return;
      }
      const body = await read(req);
      res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': name });
      res.end(
        JSON.stringify({
          region: name,
          method: req.method,
          path: req.url,
          bytes: body.length,
          sha256: createHash('sha256').update(body).digest('hex'),
          host: req.headers.host,
          authorization: req.headers.authorization ?? null,
          forwardedFor: req.headers['x-forwarded-for'] ?? null,
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(onPort, '127.0.0.1', resolve));
    self.port = (server.address() as AddressInfo).port;
    self.url = `http://127.0.0.1:${self.port}`;
  };
  await listen(port);
  self.kill = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  self.restart = () => listen(self.port);
  return self;
}

function read(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

function send(url: string, method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers, agent: false }, async (res) => {
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: await read(res) });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const json = (answer: Answer): Record<string, unknown> => JSON.parse(answer.body.toString()) as Record<string, unknown>;

const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

async function frontDoor(regions: readonly Upstream[], options: Partial<FrontDoorOptions> = {}): Promise<FrontDoor> {
  const door = await startFrontDoor({
    regions: regions.map((r) => ({ name: r.name, url: r.url })),
    log: () => undefined,
    ...options,
    health: { intervalMs: 50, timeoutMs: 200, failures: 3, successes: 2, ...options.health },
  });
  opened.push(door);
  return door;
}

async function regions(): Promise<[Upstream, Upstream]> {
  const a = await upstream('a');
  const b = await upstream('b');
  opened.push({ close: () => a.kill() }, { close: () => b.kill() });
  return [a, b];
}

describe('afterProbe', () => {
  const thresholds = { failures: 3, successes: 2 };
  const fresh: RegionHealth = { healthy: true, failures: 0, successes: 0, probes: 0 };

  it('marks a region down after the third failed probe in a row, and not before', () => {
    let h = fresh;
    h = afterProbe(h, false, thresholds, 'refused');
    h = afterProbe(h, false, thresholds, 'refused');
    expect(h).toMatchObject({ healthy: true, failures: 2 });
    h = afterProbe(h, true, thresholds);
    expect(h).toMatchObject({ healthy: true, failures: 0, successes: 1 });
    for (let i = 0; i < 3; i += 1) h = afterProbe(h, false, thresholds, 'status 503');
    expect(h).toEqual({ healthy: false, failures: 3, successes: 0, probes: 6, lastError: 'status 503' });
  });

  it('marks it up again after the second good probe in a row', () => {
    let h: RegionHealth = { healthy: false, failures: 5, successes: 0, probes: 5 };
    h = afterProbe(h, true, thresholds);
    expect(h.healthy).toBe(false);
    h = afterProbe(h, true, thresholds);
    expect(h).toEqual({ healthy: true, failures: 0, successes: 2, probes: 7 });
  });
});

describe('regionsFor', () => {
  const up: RegionHealth = { healthy: true, failures: 0, successes: 1, probes: 1 };
  const down: RegionHealth = { healthy: false, failures: 3, successes: 0, probes: 3 };

  it.each([
    ['both up: the configured order', { a: up, b: up }, ['a', 'b']],
    ['the first down: the second alone', { a: down, b: up }, ['b']],
    ['none up: fail open, in order', { a: down, b: down }, ['a', 'b']],
    ['a region never probed counts as up', {}, ['a', 'b']],
  ])('ordered, %s', (_what, health, expected) => {
    expect(regionsFor(['a', 'b'], health, 'ordered', 'x')).toEqual(expected);
  });

  it('spreads clients over the healthy regions, one start per client, the rest after it', () => {
    const starts = new Set<string>();
    for (let i = 0; i < 50; i += 1) {
      const order = regionsFor(['a', 'b', 'c'], { a: up, b: up, c: up }, 'spread', `127.0.0.1:${40_000 + i}`);
      expect([...order].sort()).toEqual(['a', 'b', 'c']);
      starts.add(order[0] as string);
      expect(regionsFor(['a', 'b', 'c'], { a: up, b: up, c: up }, 'spread', `127.0.0.1:${40_000 + i}`)).toEqual(order);
    }
    expect(starts).toEqual(new Set(['a', 'b', 'c']));
    expect(regionsFor(['a', 'b', 'c'], { a: up, b: down, c: up }, 'spread', 'x')).not.toContain('b');
  });
});

describe('rerouteBoundMs', () => {
  it('is the probes a dead region needs to fail, the last one timing out, within the 30 s goal by default', () => {
    expect(rerouteBoundMs({ intervalMs: 50, timeoutMs: 200, failures: 3 })).toBe(350);
    expect(rerouteBoundMs()).toBe(4_000);
    expect(rerouteBoundMs()).toBeLessThanOrEqual(REROUTE_BOUND_MS);
  });

  it('refuses probes that could leave a dead region in rotation past 30 s', async () => {
    const [a, b] = await regions();
    await expect(frontDoor([a, b], { health: { intervalMs: 10_000, failures: 3, timeoutMs: 1_000 } })).rejects.toThrow(RangeError);
  });
});

describe('the front door', () => {
  it('passes a request and its body to a region, and the answer back, with the region named', async () => {
    const [a, b] = await regions();
    const door = await frontDoor([a, b]);
    const body = Buffer.alloc(1024 * 1024 + 7, 'x');
    const answer = await send(door.url, 'POST', '/v1/chat/completions', body, {
      authorization: 'Bearer slc_dev_probe',
      'content-type': 'application/json',
    });
    expect(answer.status).toBe(200);
    expect(answer.headers['x-sluice-region']).toBe('a');
    expect(answer.headers['x-upstream']).toBe('a');
    expect(json(answer)).toEqual({
      region: 'a',
      method: 'POST',
      path: '/v1/chat/completions',
      bytes: body.length,
      sha256: createHash('sha256').update(body).digest('hex'),
      host: `127.0.0.1:${a.port}`,
      authorization: 'Bearer slc_dev_probe',
      forwardedFor: '127.0.0.1',
    });
  });

  it('relays a stream chunk by chunk: the first arrives while the region still holds the second', async () => {
    const [a, b] = await regions();
    const door = await frontDoor([a, b]);
    const received: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const req = request(`${door.url}/stream`, { method: 'POST', agent: false }, (res) => {
        expect(res.headers['content-type']).toBe('text/event-stream');
        res.on('data', (chunk: Buffer) => {
          received.push(chunk.toString());
          // Only once the first chunk is here does the region send the second: a buffering
          // front door would never deliver it, and this test would time out.
          if (received.length === 1) a.release();
        });
        res.on('end', resolve);
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end('{}');
    });
    expect(received[0]).toBe('data: first\n\n');
    expect(received.join('')).toBe('data: first\n\ndata: second\n\ndata: [DONE]\n\n');
  });

  it('ends the request to the region when the client goes away mid-stream', async () => {
    const [a, b] = await regions();
    const door = await frontDoor([a, b]);
    await new Promise<void>((resolve, reject) => {
      const req = request(`${door.url}/stream`, { method: 'POST', agent: false }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.end('{}');
      setTimeout(() => reject(new Error('no first chunk')), 10_000).unref();
    });
    await a.streamClosed;
  });

  it('sends GETs on to the next region when one fails them, and never a POST twice', async () => {
    const [a, b] = await regions();
    // Probes far apart: this is about one request's path, not about health.
    const door = await frontDoor([a, b], { health: { intervalMs: 5_000, timeoutMs: 1_000 } });
    a.statusFor.set('GET /v1/models/x', 503);
    a.statusFor.set('POST /v1/chat/completions', 503);
    const get = await send(door.url, 'GET', '/v1/models/x');
    expect(get.status).toBe(200);
    expect(json(get).region).toBe('b');
    const post = await send(door.url, 'POST', '/v1/chat/completions', '{}');
    expect(post.status).toBe(503);
    expect(post.headers['x-sluice-region']).toBe('a');

    // A region that refuses connections: the GET goes on, the POST gets the front door's 502.
    await a.kill();
    expect(json(await send(door.url, 'GET', '/v1/models')).region).toBe('b');
    const refused = await send(door.url, 'POST', '/v1/chat/completions', '{}');
    expect(refused.status).toBe(502);
    const envelope = json(refused).error as Record<string, unknown>;
    expect(envelope).toEqual({ message: expect.any(String), type: 'api_error', param: null, code: null, request_id: expect.stringMatching(/^req_/) });
    expect(refused.headers['x-request-id']).toBe(envelope.request_id);
  });

  it('moves every request to the other region once the probes find one dead, and back when it returns', async () => {
    const [a, b] = await regions();
    const changes: [string, RegionHealth][] = [];
    let changed: () => void = () => undefined;
    const door = await frontDoor([a, b], {
      onHealthChange: (region, health) => {
        changes.push([region, health]);
        changed();
      },
    });
    const next = (): Promise<void> =>
      new Promise((resolve) => {
        changed = resolve;
      });
    expect(json(await send(door.url, 'POST', '/v1/chat/completions', '{}')).region).toBe('a');

    const wentDown = next();
    await a.kill();
    await wentDown;
    // Down after exactly the third failed probe in a row: the configured bound, not a guess.
    expect(changes[0]?.[0]).toBe('a');
    expect(changes[0]?.[1]).toMatchObject({ healthy: false, failures: 3 });
    for (let i = 0; i < 5; i += 1) {
      const answer = await send(door.url, 'POST', '/v1/chat/completions', '{}');
      expect(answer.status).toBe(200);
      expect(json(answer).region).toBe('b');
    }

    const cameBack = next();
    await a.restart();
    await cameBack;
    expect(changes[1]?.[0]).toBe('a');
    expect(changes[1]?.[1]).toMatchObject({ healthy: true, successes: 2 });
    expect(json(await send(door.url, 'POST', '/v1/chat/completions', '{}')).region).toBe('a');
    expect(door.health()).toMatchObject({ a: { healthy: true }, b: { healthy: true } });
  });

  it('takes a region whose probes answer 5xx out of rotation (its store is down, say)', async () => {
    const [a, b] = await regions();
    let changed: () => void = () => undefined;
    const down = new Promise<void>((resolve) => {
      changed = resolve;
    });
    const door = await frontDoor([a, b], { health: { headers: { authorization: 'Bearer slc_dev_probe' } }, onHealthChange: () => changed() });
    a.statusFor.set('GET /v1/models', 503);
    await down;
    expect(door.health().a).toMatchObject({ healthy: false, lastError: 'status 503' });
    expect(json(await send(door.url, 'POST', '/v1/chat/completions', '{}')).region).toBe('b');
  });

  it('answers 504 when the chosen region stays silent, and takes a region whose probes time out out of rotation', async () => {
    const [a, b] = await regions();
    let changed: () => void = () => undefined;
    const down = new Promise<void>((resolve) => {
      changed = resolve;
    });
    const door = await frontDoor([a, b], { originTimeoutMs: 300, onHealthChange: () => changed() });
    a.hang.add('POST /v1/chat/completions');
    const silent = await send(door.url, 'POST', '/v1/chat/completions', '{}');
    expect(silent.status).toBe(504);
    expect((json(silent).error as Record<string, unknown>).type).toBe('api_error');
    a.hang.add('GET /v1/models');
    await down;
    expect(door.health().a).toMatchObject({ healthy: false, lastError: expect.stringContaining('no answer') });
    expect(json(await send(door.url, 'POST', '/v1/chat/completions', '{}')).region).toBe('b');
  });

  it('spreads clients over both regions when asked', async () => {
    const [a, b] = await regions();
    const door = await frontDoor([a, b], { routing: 'spread' });
    const seen = new Set<unknown>();
    for (let i = 0; i < 40; i += 1) seen.add(json(await send(door.url, 'POST', '/v1/chat/completions', '{}')).region);
    expect(seen).toEqual(new Set(['a', 'b']));
  });
});

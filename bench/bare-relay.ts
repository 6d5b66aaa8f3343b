/**
 * The control for the gateway's CPU and latency figures: a bare pass-through relay over the same
 * node:http pieces (a server, a keep-alive agent, each upstream chunk written on as it arrives)
 * with none of Sluice's work (no key lookup, no admission, no relay parsing, no settlement, no
 * Lambda shim). What it costs on this machine is what any Node hop costs; the gateway's figures
 * minus its figures are Sluice's own. It speaks the same IPC protocol as `gateway-server.ts`.
 */
import http from 'node:http';
import type { FromGateway, GatewayStats, ToGateway } from './protocol';
import { mainThreadWakeups } from './wakeups';

function send(message: FromGateway): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  const upstream = new URL(process.env.BENCH_UPSTREAM_URL ?? '');
  if (upstream.protocol !== 'http:') throw new Error('BENCH_UPSTREAM_URL must be the simulator\'s http base URL');
  const base = upstream.pathname.replace(/\/+$/, '');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  let inflight = 0;
  let served = 0;
  /** `idle` calls waiting for the last request to end. */
  const idleWaiters: number[] = [];

  const server = http.createServer({ noDelay: true }, (req, res) => {
    inflight += 1;
    const done = (): void => {
      inflight -= 1;
      served += 1;
      if (inflight === 0) for (const id of idleWaiters.splice(0)) send({ type: 'stats', id, stats: stats() });
    };
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const path = (req.url ?? '/').replace(/^\/v1/, base);
      const up = http.request(
        { host: upstream.hostname, port: upstream.port, path, method: req.method, agent, headers: { 'content-type': 'application/json', 'content-length': String(body.length) } },
        (ur) => {
          ur.socket.setNoDelay(true);
          res.writeHead(ur.statusCode ?? 502, { 'content-type': ur.headers['content-type'] ?? 'application/octet-stream' });
          res.flushHeaders();
          ur.on('data', (c: Buffer) => {
            if (!res.write(c)) {
              ur.pause();
              res.once('drain', () => ur.resume());
            }
          });
          ur.on('end', () => res.end(done));
          ur.on('error', () => {
            res.destroy();
            done();
          });
        },
      );
      up.on('error', () => {
        if (!res.headersSent) res.writeHead(502);
        res.end(done);
      });
      up.setNoDelay(true);
      up.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');

  const stats = (): GatewayStats => {
    const cpu = process.cpuUsage();
    const m = process.memoryUsage();
    return {
      cpuUserUs: cpu.user,
      cpuSystemUs: cpu.system,
      wakeups: mainThreadWakeups(),
      rss: m.rss,
      heapUsed: m.heapUsed,
      external: m.external,
      arrayBuffers: m.arrayBuffers,
      peakRss: m.rss,
      peakHeapUsed: m.heapUsed,
      peakExternal: m.external,
      trips: { ledger: 0, lookups: 0 },
      inflight,
      served,
    };
  };
  process.on('message', (raw: ToGateway) => {
    switch (raw.type) {
      case 'stats':
        send({ type: 'stats', id: raw.id, stats: stats() });
        return;
      case 'samples':
        send({ type: 'samples', id: raw.id, samples: [] });
        return;
      case 'idle':
        if (inflight === 0) send({ type: 'stats', id: raw.id, stats: stats() });
        else idleWaiters.push(raw.id);
        return;
      case 'stop':
        server.close();
        server.closeAllConnections();
        agent.destroy();
        send({ type: 'ok', id: raw.id });
        process.disconnect?.();
        setImmediate(() => process.exit(0));
        return;
      default:
        send({ type: 'ok', id: raw.id });
    }
  });
  process.once('disconnect', () => process.exit(0));
  send({ type: 'ready', url: `http://127.0.0.1:${address.port}`, node: process.version });
}

main().catch((err: unknown) => {
  send({ type: 'failed', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});

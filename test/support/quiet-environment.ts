/**
 * Jest's node environment, quiet on success: what a test writes through `console` or to
 * `process.stdout`/`process.stderr` (a production log line, CDK's "Bundling asset" notices) is kept while the test
 * runs and shown only if that test fails. `npm run test:verbose` shows everything as it happens.
 */
import NodeEnvironment from 'jest-environment-node';

/** The part of jest-circus's test events this environment reads. */
interface TestEvent {
  readonly name: string;
  readonly test?: { readonly errors: readonly unknown[] };
}

type Method = 'log' | 'info' | 'warn' | 'error' | 'debug';
const METHODS: readonly Method[] = ['log', 'info', 'warn', 'error', 'debug'];

interface Kept {
  readonly method: Method | 'stdout' | 'stderr';
  readonly args: unknown[];
}

export default class QuietEnvironment extends NodeEnvironment {
  private kept: Kept[] = [];
  private readonly verbose = process.env.SLUICE_TEST_VERBOSE === '1';
  private restore: (() => void) | undefined;

  override async setup(): Promise<void> {
    await super.setup();
    if (this.verbose) return;
    // Jest has installed its own console for this file by now; keep calls instead of printing them.
    const jestConsole = this.global.console as Console;
    const originals = new Map<Method, (...args: unknown[]) => void>();
    for (const method of METHODS) {
      originals.set(method, jestConsole[method].bind(jestConsole));
      jestConsole[method] = (...args: unknown[]): void => {
        this.kept.push({ method, args });
      };
    }
    // Jest's reporters write to stderr from the parent process; in this worker both streams are
    // the tests' own (a figure a test prints, CDK's notices), kept like console calls.
    const keep = (stream: NodeJS.WriteStream, method: 'stdout' | 'stderr'): (() => void) => {
      const write = stream.write;
      stream.write = ((chunk: unknown, ...rest: unknown[]): boolean => {
        this.kept.push({ method, args: [typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString()] });
        const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
        done?.();
        return true;
      }) as typeof stream.write;
      writers.set(method, (text) => write.call(stream, text));
      return () => {
        stream.write = write;
      };
    };
    const writers = new Map<'stdout' | 'stderr', (text: string) => void>();
    const undo = [keep(process.stdout, 'stdout'), keep(process.stderr, 'stderr')];
    this.restore = (): void => {
      for (const u of undo) u();
      for (const [method, fn] of originals) jestConsole[method] = fn;
    };
    this.flush = (): void => {
      for (const { method, args } of this.kept) {
        if (method === 'stdout' || method === 'stderr') writers.get(method)?.(String(args[0]));
        else (originals.get(method) as (...a: unknown[]) => void)(...args);
      }
      this.kept = [];
    };
  }

  /** Prints what was kept (set up in `setup`). */
  private flush: () => void = () => undefined;

  handleTestEvent(event: TestEvent): void {
    if (this.verbose) return;
    if (event.name === 'test_start') this.kept = [];
    const failed = (event.test?.errors.length ?? 0) > 0;
    // A failing test, or a failing hook outside any test, shows what it wrote; a passing one drops it.
    if ((event.name === 'test_done' && failed) || event.name === 'hook_failure') this.flush();
    else if (event.name === 'test_done') this.kept = [];
  }

  override async teardown(): Promise<void> {
    this.restore?.();
    await super.teardown();
  }
}

/**
 * Runs the simulator as its own process (local mode, benchmarks):
 *
 *   npx tsx local/simulator/main.ts [--port N] [--host H] [--key K]... [--auth-header NAME]
 *       [--chunk-delay-ms N] [--require-max-tokens] [--no-record]
 *
 * Prints the base URL (with `/v1`) as its only stdout line once listening, so a parent process
 * can read it; stops cleanly on SIGINT/SIGTERM.
 */
import { startSimulator, type SimulatorOptions } from './server';

interface Mutable {
  port?: number;
  host?: string;
  acceptedKeys?: string[];
  authHeader?: string;
  chunkDelayMs?: number;
  requireMaxTokens?: boolean;
  record?: boolean;
}

function parseArgs(argv: readonly string[]): SimulatorOptions {
  const out: Mutable = {};
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    const number = (): number => {
      const n = Number(value());
      if (!Number.isFinite(n) || n < 0) throw new Error(`${flag} needs a non-negative number`);
      return n;
    };
    switch (flag) {
      case '--port':
        out.port = number();
        break;
      case '--host':
        out.host = value();
        break;
      case '--key':
        out.acceptedKeys = [...(out.acceptedKeys ?? []), value()];
        break;
      case '--auth-header':
        out.authHeader = value();
        break;
      case '--chunk-delay-ms':
        out.chunkDelayMs = number();
        break;
      case '--require-max-tokens':
        out.requireMaxTokens = true;
        break;
      case '--no-record':
        out.record = false;
        break;
      default:
        throw new Error(`unknown argument ${flag}`);
    }
  }
  return out;
}

async function main(): Promise<void> {
  const sim = await startSimulator(parseArgs(process.argv.slice(2)));
  process.stdout.write(`${sim.url}\n`);
  const stop = (): void => {
    sim.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`simulator: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

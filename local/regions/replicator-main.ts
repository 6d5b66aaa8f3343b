/**
 * The local replicator as a process of its own, so it can be killed (SIGKILL included) and
 * started again on its saved state: `node --import tsx local/regions/replicator-main.ts <config.json>`.
 *
 * The config file holds {@link ReplicatorOptions}' plain fields: `regions`, `tables`, `lagMs`,
 * `pollIntervalMs`, `idlePollMs`, `stateFile`, `persistEveryMs`. The process prints
 * `[replicator] ready` once replicating, and stops (saving its state) on SIGINT or SIGTERM.
 */
import { readFileSync } from 'node:fs';
import { type ReplicatorOptions, startReplicator } from './replicator';

type FileOptions = Pick<
  ReplicatorOptions,
  'regions' | 'tables' | 'lagMs' | 'pollIntervalMs' | 'idlePollMs' | 'stateFile' | 'persistEveryMs'
>;

async function main(): Promise<void> {
  const path = process.argv[2];
  if (path === undefined) throw new Error('usage: replicator-main.ts <config.json>');
  const options = JSON.parse(readFileSync(path, 'utf8')) as FileOptions;
  const replicator = await startReplicator({ ...options, log: (line) => console.error(line) });
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void replicator.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(`[replicator] stop failed: ${err instanceof Error ? err.message : String(err)}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  console.log('[replicator] ready');
}

main().catch((err: unknown) => {
  console.error(`[replicator] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});

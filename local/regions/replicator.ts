/**
 * The local replicator: DynamoDB global tables (version 2019.11.21, multi-Region eventual
 * consistency) between DynamoDB Local instances, one per region. It reads every replicated
 * table's stream in every region and copies each item write to the other regions after a
 * settable lag, with last writer wins by write time; its own writes appear in the receiving
 * region's stream like any write, as replicated writes do in every replica's stream, and are
 * never copied back. Deletes (TTL deletes included) are copied like writes. The decisions are
 * `replication-book.ts`'s; this file reads, writes and saves.
 *
 * What survives what:
 * - **The replicator killed (even with SIGKILL) and started again** with the same `stateFile`:
 *   each stream resumes after the last record saved, writes due but not yet made are made, and
 *   the records of writes it made after its last save are recognised as its own while it reads
 *   them again. Local writes read in that last interval (`persistEveryMs`, 250 ms by default)
 *   are read again and get a new write time, so two writes to one item in two regions inside
 *   that interval may settle to either one (both regions still agree).
 * - **A region's DynamoDB Local killed with SIGKILL and started again** on the same port and data
 *   folder: its items and its stream survive (DynamoDB Local keeps both in its database file;
 *   same stream, shard and sequence numbers, measured), so reading resumes where it stopped and
 *   the writes due there while it was down are made when it answers again, latest version only.
 *   A DynamoDB Local run in memory loses everything: the replicator then sees a new stream and
 *   forgets what that region held. One that hangs is marked down after `readTimeoutMs`, so the
 *   other regions are not held up, and caught up when it answers.
 *
 * Differences from global tables, beyond the write-time precision (see `replication-book.ts`):
 * writes are copied item by item in one process, so a transaction's items arrive one at a time
 * (as global tables also do: "not replicated as a unit"); the lag is the same for every region
 * pair; there is no `ReplicationLatency` metric; nothing is billed.
 */
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import {
  DeleteItemCommand,
  DescribeTableCommand,
  DynamoDBClient,
  PutItemCommand,
  ReturnValue,
} from '@aws-sdk/client-dynamodb';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { repeat } from '../repeat';
import { type StreamPoller, startStreamPoller } from '../stream-poller';
import { fromSdkImage, type JsonImage, toSdkImage } from './images';
import { type BookState, type BookStats, type Plan, ReplicationBook } from './replication-book';

/** One region: a name and its DynamoDB Local. */
export interface ReplicatedRegion {
  readonly name: string;
  readonly endpoint: string;
}

/** Options for {@link startReplicator}. */
export interface ReplicatorOptions {
  /** Two or more regions. */
  readonly regions: readonly ReplicatedRegion[];
  /** Full names of the replicated tables (the same in every region); each must have a stream with new images. */
  readonly tables: readonly string[];
  /** Time from a write to its copy in the other regions, milliseconds. @default 500 */
  readonly lagMs?: number;
  /** Pause between passes while records flow, milliseconds. @default 50 */
  readonly pollIntervalMs?: number;
  /**
   * A stream that returned nothing is read less and less often, up to this, milliseconds. Also
   * the precision of a quiet item's write time. @default 250
   */
  readonly idlePollMs?: number;
  /** Where the replicator's state is saved (JSON, mode 0600), so a restart resumes. @default not saved */
  readonly stateFile?: string;
  /** How often the state is saved while it changes, milliseconds. @default 250 */
  readonly persistEveryMs?: number;
  /** How long an item nothing happens to is remembered, milliseconds. @default max(10 s, 10 × lag) */
  readonly forgetAfterMs?: number;
  /** How long a region that failed is left alone before it is tried again, milliseconds. @default 500 */
  readonly retryDownMs?: number;
  /** A stream read that takes longer marks its region down (a hung database), milliseconds. @default 10000 */
  readonly readTimeoutMs?: number;
  /** Writes in flight at once. @default 16 */
  readonly concurrency?: number;
  /** Run passes in the background; false leaves them to `pass()`. @default true */
  readonly autoStart?: boolean;
  /** @default console.error */
  readonly log?: (message: string) => void;
  /** @default Date.now */
  readonly clock?: () => number;
}

/** Counters of a running replicator. */
export interface ReplicatorStats extends BookStats {
  /** Writes waiting for their lag or for their region, and records still expected back. */
  readonly pending: number;
  readonly expected: number;
  /** Items the replicator currently remembers. */
  readonly items: number;
  /** Regions that failed their last read or write and are being retried. */
  readonly down: readonly string[];
  /** The lag in force. */
  readonly lagMs: number;
}

/** A running replicator. */
export interface Replicator {
  /** Sets the lag for every write from now on, including those already waiting. */
  setLag(ms: number): void;
  /** One pass: read every stream, make the writes due, save the state if it is time. */
  pass(): Promise<void>;
  /**
   * Resolves once nothing is waiting and a pass read every stream of every region to its end
   * and found nothing new; rejects after `timeoutMs` (default 30 s).
   */
  settle(options?: { readonly timeoutMs?: number }): Promise<void>;
  stats(): ReplicatorStats;
  /** Stops the passes and saves the state; idempotent. */
  stop(): Promise<void>;
}

/** The saved state: the book and, per region and table, where each stream was read to. */
interface SavedState {
  readonly version: 1;
  readonly book: BookState;
  readonly streams: Record<string, Record<string, { readonly streamArn: string; readonly checkpoints: Record<string, string> }>>;
}

/** GetRecords' largest page: a pass that gets fewer has read the shard to its end. */
const PAGE = 1000;

/**
 * Starts replicating. Regions that do not answer yet are retried: the replicator can start before
 * or while one of them is down.
 *
 * @throws Error when a table has no stream with new images (nothing to copy from).
 */
export async function startReplicator(options: ReplicatorOptions): Promise<Replicator> {
  const names = options.regions.map((r) => r.name);
  const clock = options.clock ?? Date.now;
  const log = options.log ?? ((message: string) => console.error(message));
  let lagMs = nonNegative(options.lagMs ?? 500, 'lagMs');
  const pollIntervalMs = nonNegative(options.pollIntervalMs ?? 50, 'pollIntervalMs');
  const idlePollMs = Math.max(pollIntervalMs, options.idlePollMs ?? 250);
  const persistEveryMs = options.persistEveryMs ?? 250;
  const retryDownMs = options.retryDownMs ?? 500;
  const readTimeoutMs = options.readTimeoutMs ?? 10_000;
  const concurrency = Math.max(1, options.concurrency ?? 16);
  const forgetAfter = (): number => options.forgetAfterMs ?? Math.max(10_000, 10 * lagMs);

  const saved = options.stateFile === undefined ? undefined : await readState(options.stateFile);
  const book = new ReplicationBook(names, saved?.book);
  if (saved !== undefined) book.startReplay(options.tables);

  const clients = new Map<string, DynamoDBClient>();
  for (const region of options.regions) clients.set(region.name, regionClient(region.endpoint, readTimeoutMs));
  try {
    await checkStreams(options.regions, options.tables, clients);
  } catch (err) {
    for (const client of clients.values()) client.destroy();
    throw err;
  }

  /** A poller and the records it handed over in the pass under way (its own: an abandoned one's late records go nowhere). */
  interface Stream {
    readonly poller: StreamPoller;
    readonly buffer: { keys: JsonImage; image: JsonImage | null }[];
  }
  /** One stream: its poller (made when the region answers), how often to read it, where it was read to. */
  interface Reader {
    readonly region: ReplicatedRegion;
    readonly table: string;
    stream?: Stream;
    streamArn?: string;
    checkpoints: Record<string, string>;
    nextAt: number;
    idleMs: number;
    /** When its last read started, if that read found nothing new (for `settle`). */
    emptyAt?: number;
  }
  const readers: Reader[] = [];
  for (const region of options.regions) {
    for (const table of options.tables) {
      const previous = saved?.streams[region.name]?.[table];
      readers.push({
        region,
        table,
        streamArn: previous?.streamArn,
        checkpoints: { ...(previous?.checkpoints ?? {}) },
        nextAt: 0,
        idleMs: pollIntervalMs,
      });
    }
  }
  const downUntil = new Map<string, number>();
  const isUp = (region: string): boolean => (downUntil.get(region) ?? 0) <= clock();
  const markDown = (region: string, err: unknown): void => {
    if (downUntil.get(region) === undefined) log(`[replicator] region ${region} is not answering: ${message(err)}`);
    downUntil.set(region, clock() + retryDownMs);
  };
  const markUp = (region: string): void => {
    if (downUntil.has(region)) {
      downUntil.delete(region);
      log(`[replicator] region ${region} answers again`);
    }
  };

  let dirty = saved === undefined;
  /** The last time a record was read or a write made. */
  let activityAt = clock();
  let savedAt = 0;
  let lastPrune = clock();

  async function readStream(reader: Reader): Promise<{ read: number; startedAt: number } | undefined> {
    const name = reader.region.name;
    if (!isUp(name) || clock() < reader.nextAt) return undefined;
    const stream = reader.stream ?? (await within(openStream(reader), readTimeoutMs).catch((err: unknown) => fail(reader, err)));
    if (stream === undefined) return undefined;
    try {
      const startedAt = clock();
      const read = await within(stream.poller.pollOnce(), readTimeoutMs);
      const now = clock();
      for (const record of stream.buffer.splice(0)) book.observe(name, reader.table, record.keys, record.image, now);
      reader.checkpoints = stream.poller.checkpoints();
      markUp(name);
      if (read > 0) {
        dirty = true;
        activityAt = now;
        reader.emptyAt = undefined;
      } else {
        reader.emptyAt = startedAt;
      }
      return { read, startedAt };
    } catch (err) {
      return fail(reader, err);
    }
  }

  async function openStream(reader: Reader): Promise<Stream> {
    const buffer: Stream['buffer'] = [];
    const poller = await startStreamPoller({
      endpoint: reader.region.endpoint,
      tableName: reader.table,
      autoStart: false,
      batchSize: PAGE,
      discoverEveryMs: 5_000,
      resumeAfter: reader.checkpoints,
      log,
      handler: async (event: DynamoDBStreamEvent) => {
        for (const record of event.Records) {
          const keys = record.dynamodb?.Keys;
          if (keys === undefined) continue;
          // No new image: a delete, by a request or by TTL (DynamoDB Local names the latter
          // UNKNOWN_TO_SDK_VERSION; deployed it is REMOVE with a service userIdentity).
          buffer.push({ keys: keys as JsonImage, image: (record.dynamodb?.NewImage as JsonImage | undefined) ?? null });
        }
      },
    });
    if (reader.streamArn !== undefined && reader.streamArn !== poller.streamArn) {
      // A new stream: the table was made again, or DynamoDB Local lost its data.
      log(`[replicator] ${reader.region.name} ${reader.table} has a new stream; what that region held is forgotten`);
      book.forgetRegion(reader.region.name);
    }
    reader.streamArn = poller.streamArn;
    reader.stream = { poller, buffer };
    return reader.stream;
  }

  /** A read failed or hung: the region rests, and is read again from the last checkpoint by a new poller. */
  function fail(reader: Reader, err: unknown): undefined {
    markDown(reader.region.name, err);
    reader.emptyAt = undefined;
    // Not awaited: a hung poller's stop would wait for its hung read.
    void reader.stream?.poller.stop().catch(() => undefined);
    reader.stream = undefined;
    return undefined;
  }

  async function apply(plan: Plan): Promise<void> {
    const client = clients.get(plan.target);
    if (client === undefined || !isUp(plan.target)) return;
    try {
      const old =
        plan.image === null
          ? (await client.send(new DeleteItemCommand({ TableName: plan.table, Key: toSdkImage(plan.keys), ReturnValues: ReturnValue.ALL_OLD })))
              .Attributes
          : (await client.send(new PutItemCommand({ TableName: plan.table, Item: toSdkImage(plan.image), ReturnValues: ReturnValue.ALL_OLD })))
              .Attributes;
      book.applied(plan, fromSdkImage(old), clock());
      dirty = true;
      activityAt = clock();
    } catch (err) {
      // Left due: made again when the region answers.
      markDown(plan.target, err);
    }
  }

  let passing: Promise<void> | undefined;
  function pass(): Promise<void> {
    passing ??= runPass().finally(() => {
      passing = undefined;
    });
    return passing;
  }

  /**
   * Nothing is waiting, every region answers, and every stream was read, and found empty, by a
   * read that started after the last record read or write made: nothing is left to copy or to
   * come back.
   */
  function quiet(): boolean {
    const outstanding = book.outstanding();
    if (outstanding.pending > 0 || outstanding.expected > 0 || downUntil.size > 0) return false;
    return readers.every((r) => r.emptyAt !== undefined && r.emptyAt > activityAt);
  }

  async function runPass(): Promise<void> {
    const results = await Promise.all(readers.map(async (reader) => ({ reader, result: await readStream(reader) })));
    for (const { reader, result } of results) {
      if (result === undefined) continue; // resting after an idle read, or its region is down
      if (result.read < PAGE) book.drained(reader.region.name, reader.table, result.startedAt);
      // Quiet streams are read less often; any record brings the pace back.
      reader.idleMs = result.read > 0 ? pollIntervalMs : Math.min(idlePollMs, Math.max(pollIntervalMs, reader.idleMs * 2));
      reader.nextAt = clock() + (result.read > 0 ? 0 : reader.idleMs);
    }
    const plans = book.due(clock(), lagMs, isUp);
    for (let i = 0; i < plans.length; i += concurrency) {
      await Promise.all(plans.slice(i, i + concurrency).map(apply));
    }
    const now = clock();
    if (now - lastPrune >= 1_000) {
      if (book.prune(now, forgetAfter()) > 0) dirty = true;
      lastPrune = now;
    }
    if (dirty && now - savedAt >= persistEveryMs) await save();
  }

  async function save(): Promise<void> {
    if (options.stateFile === undefined) {
      dirty = false;
      return;
    }
    const streams: SavedState['streams'] = {};
    for (const reader of readers) {
      if (reader.streamArn === undefined) continue;
      (streams[reader.region.name] ??= {})[reader.table] = { streamArn: reader.streamArn, checkpoints: reader.checkpoints };
    }
    const state: SavedState = { version: 1, book: book.toJSON(), streams };
    dirty = false;
    savedAt = clock();
    await writeState(options.stateFile, state);
  }

  const looping =
    options.autoStart === false ? undefined : repeat(pollIntervalMs, pass, (err) => log(`[replicator] pass failed: ${message(err)}`));

  let stopping: Promise<void> | undefined;
  return {
    setLag(ms: number): void {
      lagMs = nonNegative(ms, 'lag');
    },
    pass,
    async settle({ timeoutMs = 30_000 } = {}): Promise<void> {
      // Real time, not the replicator's clock: a test's clock may stand still.
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        await pass();
        if (quiet()) return;
        if (Date.now() > deadline) {
          const s = book.outstanding();
          throw new Error(
            `replication did not settle in ${timeoutMs} ms (${s.pending} writes due, ${s.expected} records expected, ` +
              `down: ${[...downUntil.keys()].join(', ') || 'none'})`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, Math.max(5, pollIntervalMs)));
      }
    },
    stats(): ReplicatorStats {
      const outstanding = book.outstanding();
      return { ...book.stats, ...outstanding, items: book.size, down: [...downUntil.keys()], lagMs };
    },
    stop: () =>
      (stopping ??= (async () => {
        await looping?.stop();
        await passing;
        await Promise.all(readers.map((r) => r.stream?.poller.stop()));
        if (options.stateFile !== undefined) await save();
        for (const client of clients.values()) client.destroy();
      })()),
  };
}

/** Rejects when `promise` takes longer than `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A client for one region: one attempt, short timeouts, so a dead region is noticed and skipped fast. */
function regionClient(endpoint: string, requestTimeoutMs: number): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 1,
    requestHandler: { connectionTimeout: 2_000, requestTimeout: requestTimeoutMs, throwOnRequestTimeout: true },
  });
}

/** Every table must stream new images in every region that answers (a down one is checked when it is read). */
async function checkStreams(
  regions: readonly ReplicatedRegion[],
  tables: readonly string[],
  clients: ReadonlyMap<string, DynamoDBClient>,
): Promise<void> {
  for (const region of regions) {
    const client = clients.get(region.name);
    if (client === undefined) continue;
    for (const table of tables) {
      let view: string | undefined;
      try {
        const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
        view = Table?.StreamSpecification?.StreamEnabled === true ? Table.StreamSpecification.StreamViewType : 'none';
      } catch (err) {
        if ((err as { name?: string }).name === 'ResourceNotFoundException') throw new Error(`table ${table} does not exist in region ${region.name}`);
        continue; // not answering: checked again when it is read
      }
      if (view !== 'NEW_IMAGE' && view !== 'NEW_AND_OLD_IMAGES') {
        throw new Error(`table ${table} in region ${region.name} must stream new images to be replicated (it streams ${view})`);
      }
    }
  }
}

async function readState(file: string): Promise<SavedState | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const state = JSON.parse(text) as SavedState;
  if (state.version !== 1 || state.book?.version !== 1) throw new Error(`${file} is not a replicator state this version reads`);
  return state;
}

/** Written whole to a temporary file, then renamed: a kill leaves the old state or the new, never half. */
async function writeState(file: string, state: SavedState): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, JSON.stringify(state), { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, file);
}

function nonNegative(value: number, name: string): number {
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number of milliseconds ≥ 0, got ${value}`);
  return value;
}

function message(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

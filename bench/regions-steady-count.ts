/**
 * The counting behind `regions-steady.ts`, kept pure: what a write to a region's transfer item
 * did (from its counters before and after, as the region's ledger stream shows them), how many
 * cross-region moves a window of traffic made, and which requests waited for a transfer.
 *
 * The counters (`lambdas/core/transfers.ts`) only grow, so one write's effect is what grew:
 * `asked_<p>` an ask of `p`; `sent_<p>` a give to `p` (the move); `answered_<p>` without `sent_<p>`
 * an answer that gave nothing; `recv_<p>` a receipt from `p` (the far end of a give).
 */
import { peerCounters, type PeerCounters } from '../lambdas/core/transfers';

/** What one write to a transfer item did towards one peer. */
export type TransferEventKind = 'ask' | 'give' | 'emptyAnswer' | 'receive';

/** One thing a region's transfer item records, as read from that region's stream. */
export interface TransferEvent {
  readonly kind: TransferEventKind;
  /** The region that wrote the item. */
  readonly region: string;
  readonly peer: string;
  /** `credit`, or `key` for a key window's headroom under a key limit. */
  readonly quantity: 'credit' | 'key';
  /** What grew: the amount asked, given or received (0 for an answer that gave nothing). */
  readonly micros: number;
  /** When it was read from the stream, milliseconds on the bench's clock. */
  readonly at: number;
}

/** A transfer item's image as the stream shows it (unmarshalled). */
export type TransferImage = Readonly<Record<string, unknown>>;

/**
 * The events of one write: each counter towards each peer that grew between `before` (the
 * item's previous image, undefined for a new item: every counter 0) and `after`.
 */
export function eventsOf(before: TransferImage | undefined, after: TransferImage, regions: readonly string[], at: number): TransferEvent[] {
  const region = typeof after.region === 'string' ? after.region : undefined;
  const sk = typeof after.sk === 'string' ? after.sk : '';
  if (region === undefined) return [];
  const quantity = sk === 'CREDIT' ? 'credit' : 'key';
  const events: TransferEvent[] = [];
  for (const peer of regions) {
    if (peer === region) continue;
    const was: PeerCounters = peerCounters(before as Record<string, unknown> | undefined, peer);
    const now: PeerCounters = peerCounters(after as Record<string, unknown>, peer);
    const base = { region, peer, quantity, at } as const;
    if (now.asked > was.asked) events.push({ ...base, kind: 'ask', micros: now.asked - was.asked });
    if (now.sent > was.sent) events.push({ ...base, kind: 'give', micros: now.sent - was.sent });
    else if (now.answered > was.answered) events.push({ ...base, kind: 'emptyAnswer', micros: 0 });
    if (now.recv > was.recv) events.push({ ...base, kind: 'receive', micros: now.recv - was.recv });
  }
  return events;
}

/**
 * Follows each transfer item's images in stream order and turns each new one into its events.
 * A record read twice (the same image again) adds nothing: nothing grew.
 */
export class TransferTally {
  private readonly last = new Map<string, TransferImage>();
  readonly events: TransferEvent[] = [];

  constructor(private readonly regions: readonly string[]) {}

  observe(image: TransferImage, at: number): TransferEvent[] {
    const id = `${String(image.pk)}\u0000${String(image.sk)}`;
    const found = eventsOf(this.last.get(id), image, this.regions, at);
    this.last.set(id, image);
    this.events.push(...found);
    return found;
  }
}

/** What a window of one scenario's traffic did. */
export interface MoveCounts {
  /** Gateway requests sent in the window. */
  readonly requests: number;
  /** Gives that moved a nonzero amount: the moves. */
  readonly moves: number;
  readonly movesPer100: number;
  readonly movedMicros: number;
  readonly asks: number;
  readonly askedMicros: number;
  /** Answers that gave nothing (the giver had nothing to spare when it answered). */
  readonly emptyAnswers: number;
  /** Receipts that credited a nonzero amount (one give can land in more than one receipt, or several in one). */
  readonly receives: number;
  /** Moves by quantity. */
  readonly creditMoves: number;
  readonly keyMoves: number;
}

/** Counts the events and requests whose time `t` has `from <= t < to`. */
export function countWindow(events: readonly TransferEvent[], requestTimes: readonly number[], from: number, to: number): MoveCounts {
  const inside = events.filter((e) => e.at >= from && e.at < to);
  const gives = inside.filter((e) => e.kind === 'give' && e.micros > 0);
  const asks = inside.filter((e) => e.kind === 'ask');
  const requests = requestTimes.filter((t) => t >= from && t < to).length;
  return {
    requests,
    moves: gives.length,
    movesPer100: requests === 0 ? Number.NaN : (100 * gives.length) / requests,
    movedMicros: gives.reduce((a, e) => a + e.micros, 0),
    asks: asks.length,
    askedMicros: asks.reduce((a, e) => a + e.micros, 0),
    emptyAnswers: inside.filter((e) => e.kind === 'emptyAnswer').length,
    receives: inside.filter((e) => e.kind === 'receive' && e.micros > 0).length,
    creditMoves: gives.filter((e) => e.quantity === 'credit').length,
    keyMoves: gives.filter((e) => e.quantity === 'key').length,
  };
}

/** One gateway request's span, milliseconds on the bench's clock. */
export interface RequestSpan {
  readonly region: string;
  readonly start: number;
  readonly end: number;
}

/**
 * The requests that waited for a transfer: those of a region that were in flight when that
 * region's ask was read from its stream and still ran at least `minWaitMs` after it. A waiting
 * admission writes its ask after its own refusal and then waits for the answer, two replication
 * hops later, or for its wait's bound; a request that did not wait ends within its own few
 * milliseconds. `minWaitMs` is below both (the caller takes half the smaller of the lag and the
 * wait), so a waiter is never missed, and the time the ask took to be read (a stream poll) is
 * covered by it.
 */
export function waitedForTransfer(requests: readonly RequestSpan[], asks: readonly Pick<TransferEvent, 'region' | 'at'>[], minWaitMs: number): number {
  let waited = 0;
  for (const r of requests) {
    if (asks.some((a) => a.region === r.region && a.at >= r.start && r.end - a.at >= minWaitMs)) waited += 1;
  }
  return waited;
}

/**
 * Which region request `i` goes to for a split of `percentFirst` % to the first region: spread
 * evenly (the first region's count after `i + 1` requests is `floor((i + 1) × p / 100)`), so any
 * stretch of traffic keeps the split, not only the whole run.
 */
export function regionOf(i: number, percentFirst: number, regions: readonly [string, string]): string {
  const first = Math.floor(((i + 1) * percentFirst) / 100) - Math.floor((i * percentFirst) / 100);
  return first === 1 ? regions[0] : regions[1];
}

/** What one tick of a scenario's open loop sends besides its gateway request (at the tick): the samples, half a tick later. */
export interface TickSamples {
  /** The gateway request's region (`regionOf`). */
  readonly region: string;
  /** A direct call to the simulator, non-streamed or streamed; none on half the ticks. */
  readonly direct?: 'plain' | 'stream';
  /** The region whose floor (one admission transaction on its DynamoDB Local) is sampled. */
  readonly floor?: string;
}

/** A region's floor is due this many ticks after its last one (the regions' floors together: one every other tick). */
const FLOOR_EVERY_TICKS = 4;

/**
 * Where the samples go among a scenario's ticks, so that they sit in the same place for every
 * region's requests whatever the split. A sample sent at the instant of a request shares its
 * DynamoDB Local with that request's admission (the floor's transaction and the admission queue
 * on it), or the simulator and this process with its call: when the samples follow the requests'
 * parity (the floor on every odd tick, as it was), a 50/50 split, whose regions alternate, put
 * every floor on the first region's ticks, half of them on that region's own store, and the first
 * region's p50 paid for the bench's own probe (10 ms more at 5 requests/s). So the samples go half
 * a tick after the request (`SAMPLE_DELAY_TICKS`), a region's floor after one of that region's own
 * requests (one due every `FLOOR_EVERY_TICKS` ticks; after any tick once it is four times that late,
 * so a region with next to no traffic still has one), and the direct calls on ticks 0, 1, 4 and 5
 * of every 8, non-streamed after ticks 0 and 5, streamed after 1 and 4, so either kind follows
 * either of two alternating regions as often.
 */
export class SamplePlan {
  private readonly lastFloor = new Map<string, number>();

  constructor(
    private readonly percentFirst: number,
    private readonly regions: readonly [string, string],
  ) {}

  /** Tick `i`'s request and samples; call once per tick, in order. */
  at(i: number): TickSamples {
    const region = regionOf(i, this.percentFirst, this.regions);
    const phase = i % 8;
    const direct = phase === 0 || phase === 5 ? 'plain' : phase === 1 || phase === 4 ? 'stream' : undefined;
    // The most overdue region's floor first, when it is due and this is its tick (or it is long overdue).
    const since = (r: string): number => i - (this.lastFloor.get(r) ?? -FLOOR_EVERY_TICKS);
    const floor = [...this.regions]
      .filter((r) => since(r) >= FLOOR_EVERY_TICKS && (r === region || since(r) >= 4 * FLOOR_EVERY_TICKS))
      .sort((a, b) => since(b) - since(a))[0];
    if (floor !== undefined) this.lastFloor.set(floor, i);
    return { region, ...(direct === undefined ? {} : { direct }), ...(floor === undefined ? {} : { floor }) };
  }
}

/** How long after its tick's request a tick's samples are sent, in ticks: as far from that request as from the next one. */
export const SAMPLE_DELAY_TICKS = 0.5;

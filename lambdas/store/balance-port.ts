/**
 * Every balance read and write of the management API, behind one small port.
 *
 * Writes go to slice 0 of the ledger (the `BALANCE` item), and the workspace's statement is kept
 * beside it under the same partition:
 * - `STATEMENT#<ISO time>#<requestId>`: one top-up or adjustment (who, when, amount, reference or reason);
 * - `CREDITREF#<reference>`: the top-up a reference made, so a reference credits once.
 * The balance change, its statement entry and its reference marker are one transaction, so the
 * statement cannot disagree with the balance and a retried top-up cannot credit twice.
 *
 * Each top-up and adjustment also counts `statementSeq` on `BALANCE` and is conditioned on the
 * count it read before its snapshot of the balance, so no other one can land between that
 * snapshot and its write (a retry reads again). What it answers as the balance it left is that
 * snapshot plus itself: `credited` exactly (only top-ups and adjustments change it), `available`
 * as it stood just before plus the change. Two concurrent adjustments therefore answer 100 → 95
 * and 95 → 92, never both 92. Requests admitted or settled meanwhile move `available`, `held`
 * and `spent` on as they always do; the transaction cannot return what it wrote, so the answer is
 * built from what was read.
 */
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { randomBytes } from 'node:crypto';
import { formatMoney } from '../core/money-format';
import type { DocumentSender } from '../adapters/dynamo-wire';
import { lensFor, readBalanceEverywhere } from './regions-balance';
import { counterNames, quantityId } from '../core/transfers';
import { livePeers } from './regions-alive';
import { regionShare, regionTag } from './regions';
import { transferPk } from './regions-transfers';
import { UpdateBuilder } from './expr';
import { DynamoLedger, type LedgerTables } from './ledger';
import type { AdminContext } from './directory-context';
import { BALANCE, failedAt, ledgerPk, nowOf, table, transact, type TransactItem } from './directory-context';
import { BelowHeldError, ConcurrentUpdateError, ReferenceUsedError, ValidationError, WorkspaceNotFoundError } from './directory-errors';
import { checkWorkspaceId, getWorkspace } from './directory-common';
import { minorToMicros } from './directory-validate';

/** A workspace's balance: `available + held + spent = credited`, all micro-units. */
export interface BalanceView {
  readonly availableMicros: number;
  readonly heldMicros: number;
  readonly spentMicros: number;
  readonly creditedMicros: number;
}

/** One line of a workspace's statement. */
export interface StatementEntry {
  readonly kind: 'credit' | 'adjustment';
  readonly at: number;
  /** Signed for adjustments; positive for credits. */
  readonly amountMicros: number;
  readonly reference: string | null;
  readonly reason: string | null;
  readonly who: string;
  readonly requestId: string;
}

/** Who made a change and under which request: every balance write is attributed. */
export interface Actor {
  readonly who: string;
  readonly requestId: string;
}

/** The result of a top-up: applied now, or already applied earlier under the same reference. */
export type CreditResult =
  | { readonly applied: true; readonly entry: StatementEntry; readonly balance: BalanceView }
  | { readonly applied: false; readonly entry: StatementEntry; readonly balance: BalanceView };

/** The balance operations of the management API. */
export interface BalancePort {
  /** The workspace's balance; throws `WorkspaceNotFoundError` when it has none. */
  read(workspaceId: string): Promise<BalanceView>;
  /** Adds credit at face value; a reference used before with the same amount changes nothing. */
  credit(input: { workspaceId: string; micros: number; reference?: string } & Actor): Promise<CreditResult>;
  /** Corrects the balance by a signed amount, never below zero and never below what is held. */
  adjust(input: { workspaceId: string; deltaMicros: number; reason: string } & Actor): Promise<{ entry: StatementEntry; balance: BalanceView }>;
  /** The statement, newest first. */
  statement(workspaceId: string, limit: number): Promise<StatementEntry[]>;
}

const STATEMENT_PREFIX = 'STATEMENT#';
const REF_PREFIX = 'CREDITREF#';

/** References are the operator's own ids (an invoice number): short, printable, no spaces. */
function checkReference(reference: string): string {
  if (!/^[A-Za-z0-9._:/@#-]{1,128}$/.test(reference)) {
    throw new ValidationError('a reference is 1 to 128 characters of letters, digits and . _ : / @ # -');
  }
  return reference;
}

function checkReason(reason: string): string {
  const trimmed = reason.trim();
  if (trimmed.length === 0 || trimmed.length > 200 || /\p{Cc}/u.test(trimmed)) {
    throw new ValidationError('an adjustment needs a reason of 1 to 200 printable characters');
  }
  return trimmed;
}

function toEntry(item: Record<string, unknown>): StatementEntry {
  return {
    kind: item['kind'] === 'adjustment' ? 'adjustment' : 'credit',
    at: Number(item['at']),
    amountMicros: Number(item['amountMicros']),
    reference: typeof item['reference'] === 'string' ? item['reference'] : null,
    reason: typeof item['reason'] === 'string' ? item['reason'] : null,
    who: String(item['who']),
    requestId: String(item['requestId']),
  };
}

/**
 * The port on the ledger: top-ups and adjustments land on slice 0 (`BALANCE`), where the store's
 * own `creditWorkspace` puts credit too; reads are the workspace-wide sum over every slice.
 */
export class DynamoBalancePort implements BalancePort {
  /**
   * What slice 0's writes go through. In a stage with several regions the management API writes
   * only in the configuration home; when that is not the stage's home region (an operator moved
   * it), top-ups and adjustments land on that region's own slice 0 through its lens
   * (`WS#<ws>@<region>`), never on the home region's, which only the home region writes
   * (docs/regions.md). The statement lines and reference markers keep the workspace's own key.
   */
  private readonly writer: DocumentSender;
  /** Whether this region is not the stage's home region: its slice 0 may not exist yet (made by its first credit). */
  private readonly elsewhere: boolean;

  constructor(private readonly ctx: AdminContext) {
    const regions = ctx.regions;
    this.elsewhere = regions !== undefined && regionTag(regions) !== '';
    this.writer = regions !== undefined && this.elsewhere ? lensFor(ctx.doc, this.ledgerTables(), regions) : ctx.doc;
  }

  private ledgerTables(): LedgerTables {
    return { ledger: table(this.ctx, 'ledger'), usage: table(this.ctx, 'usage') };
  }

  async read(workspaceId: string): Promise<BalanceView> {
    return (await this.readInSequence(workspaceId)).balance;
  }

  /**
   * The balance, and the count of top-ups and adjustments read just before it (0 before the
   * first): a change conditioned on that count lands right after this balance or not at all.
   */
  private async readInSequence(workspaceId: string): Promise<{ balance: BalanceView; seq: number }> {
    checkWorkspaceId(workspaceId);
    const slice0 = (sender: DocumentSender): Promise<{ Item?: Record<string, unknown> }> =>
      sender.send(new GetCommand({ TableName: table(this.ctx, 'ledger'), Key: { pk: ledgerPk(workspaceId), sk: BALANCE }, ConsistentRead: true, ProjectionExpression: 'pk, statementSeq' }));
    // The workspace exists when its home-region slice 0 does (made with it; replicated here when
    // the configuration home is elsewhere), and the sequence is on the slice 0 this region writes.
    const out = await slice0(this.ctx.doc);
    if (out.Item === undefined) throw new WorkspaceNotFoundError(workspaceId);
    const own = this.elsewhere ? (await slice0(this.writer)).Item : out.Item;
    const seq = typeof own?.['statementSeq'] === 'number' ? own['statementSeq'] : 0;
    // A hot workspace's balance is split into escrow slices: the store sums them from one snapshot.
    const b = await readBalanceEverywhere(this.ctx.doc, this.ledgerTables(), this.ctx.regions, workspaceId, nowOf(this.ctx));
    return { seq, balance: { availableMicros: b.availableMicros, heldMicros: b.heldMicros, spentMicros: b.spentMicros, creditedMicros: b.creditedMicros } };
  }

  /** Whether a top-up or an adjustment has landed since `seq` was read. */
  private async sequenceMoved(workspaceId: string, seq: number): Promise<boolean> {
    const out = await this.writer.send(
      new GetCommand({ TableName: table(this.ctx, 'ledger'), Key: { pk: ledgerPk(workspaceId), sk: BALANCE }, ConsistentRead: true, ProjectionExpression: 'statementSeq' }),
    );
    const now = typeof out.Item?.['statementSeq'] === 'number' ? out.Item['statementSeq'] : 0;
    return (out.Item !== undefined || this.elsewhere) && now !== seq;
  }

  async credit(input: { workspaceId: string; micros: number; reference?: string } & Actor): Promise<CreditResult> {
    checkWorkspaceId(input.workspaceId);
    const micros = input.micros;
    if (!Number.isSafeInteger(micros) || micros <= 0) throw new ValidationError('a credit is a positive whole number of micro-units');
    const reference = input.reference === undefined ? undefined : checkReference(input.reference);
    const at = nowOf(this.ctx);
    const pk = ledgerPk(input.workspaceId);
    const entry: StatementEntry = { kind: 'credit', at, amountMicros: micros, reference: reference ?? null, reason: null, who: input.who, requestId: input.requestId };
    const ledger = table(this.ctx, 'ledger');
    // In a stage with several regions, each other region that is running gets its weighted part now.
    const spread = await this.spreadOf(micros, at);
    const kept = micros - spread.reduce((a, p) => a + p.micros, 0);
    for (let attempt = 1; ; attempt += 1) {
      const { balance: before, seq } = await this.readInSequence(input.workspaceId);
      try {
        await transact(
          { doc: this.writer },
          [
            balanceChange(ledger, pk, kept, seq, undefined, this.elsewhere),
            statementPut(ledger, pk, entry),
            ...(reference === undefined
              ? []
              : [{ Put: { TableName: ledger, Item: { pk, sk: `${REF_PREFIX}${reference}`, ...entry }, ConditionExpression: 'attribute_not_exists(pk)' } }]),
            ...(spread.length === 0 ? [] : [spreadSend(ledger, input.workspaceId, this.ctx.regions?.region ?? '', spread)]),
          ],
          async (reasons) => {
            if (failedAt(reasons, 0)) {
              if (await this.sequenceMoved(input.workspaceId, seq)) return new SequenceMovedSignal();
              return (await getWorkspace(this.ctx, input.workspaceId)) === undefined
                ? new WorkspaceNotFoundError(input.workspaceId)
                : new ValidationError('that credit would take the balance beyond what Sluice can count exactly');
            }
            if (failedAt(reasons, 2)) return new ReferenceTakenSignal();
            return undefined;
          },
        );
        return { applied: true, entry, balance: { ...before, availableMicros: before.availableMicros + micros, creditedMicros: before.creditedMicros + micros } };
      } catch (err) {
        if (err instanceof SequenceMovedSignal) {
          if (attempt >= SEQUENCE_ATTEMPTS) throw new ConcurrentUpdateError(`the balance of workspace ${input.workspaceId}`);
          continue;
        }
        if (!(err instanceof ReferenceTakenSignal) || reference === undefined) throw err;
        const got = await this.ctx.doc.send(new GetCommand({ TableName: ledger, Key: { pk, sk: `${REF_PREFIX}${reference}` }, ConsistentRead: true }));
        const original = toEntry((got.Item ?? {}) as Record<string, unknown>);
        // The same top-up sent again (a retry, a double click) is answered, not refused.
        if (original.amountMicros !== micros) throw new ReferenceUsedError(reference, original.amountMicros, original.at);
        return { applied: false, entry: original, balance: await this.read(input.workspaceId) };
      }
    }
  }

  /**
   * A top-up's spread (docs/regions.md, "A top-up's spread"): each other region whose alive mark
   * is fresh here gets its weighted part of the top-up (`regionShare`), sent through the credit
   * transfer counters in the top-up's own transaction, so its first requests find credit there
   * instead of waiting for an ask's two replication hops. A region not marked running gets
   * nothing (what is sent to a region that is down waits there, stranded, until it returns): its
   * part stays here, and moves by ask as before. Nothing in a stage with one region.
   */
  private async spreadOf(micros: number, now: number): Promise<{ readonly peer: string; readonly micros: number }[]> {
    const regions = this.ctx.regions;
    if (regions === undefined) return [];
    const live = await livePeers(this.ctx.doc, table(this.ctx, 'ledger'), regions, now);
    return live.map((peer) => ({ peer, micros: regionShare(regions, micros, peer) })).filter((p) => p.micros > 0);
  }

  async adjust(input: { workspaceId: string; deltaMicros: number; reason: string } & Actor): Promise<{ entry: StatementEntry; balance: BalanceView }> {
    checkWorkspaceId(input.workspaceId);
    const delta = input.deltaMicros;
    if (!Number.isSafeInteger(delta) || delta === 0) throw new ValidationError('an adjustment is a non-zero whole number of micro-units');
    const reason = checkReason(input.reason);
    const at = nowOf(this.ctx);
    const pk = ledgerPk(input.workspaceId);
    const ledger = table(this.ctx, 'ledger');
    const entry: StatementEntry = { kind: 'adjustment', at, amountMicros: delta, reference: null, reason, who: input.who, requestId: input.requestId };
    const need = Math.max(0, -delta);
    // The adjustment lands on slice 0. A hot workspace's credit is spread over its slices, so a
    // refusal is decided on the whole: what the others hold is first moved to slice 0.
    for (let gathered = 0, raced = 0; ; ) {
      const { balance: before, seq } = await this.readInSequence(input.workspaceId);
      try {
        await transact(
          { doc: this.writer },
          [
            balanceChange(ledger, pk, delta, seq, need, this.elsewhere),
            statementPut(ledger, pk, entry),
          ],
          async (reasons) => {
            if (!failedAt(reasons, 0)) return undefined;
            if (await this.sequenceMoved(input.workspaceId, seq)) return new SequenceMovedSignal();
            if ((await getWorkspace(this.ctx, input.workspaceId)) === undefined) return new WorkspaceNotFoundError(input.workspaceId);
            const b = await this.read(input.workspaceId);
            if (need > 0 && b.availableMicros >= need && gathered < GATHER_ATTEMPTS) return new CreditElsewhereSignal();
            return new BelowHeldError(
              `an adjustment of ${formatMoney(delta)} would take the balance below what is held: available ${formatMoney(b.availableMicros)}, held ${formatMoney(b.heldMicros)}`,
            );
          },
        );
        return { entry, balance: { ...before, availableMicros: before.availableMicros + delta, creditedMicros: before.creditedMicros + delta } };
      } catch (err) {
        if (err instanceof SequenceMovedSignal) {
          raced += 1;
          if (raced >= SEQUENCE_ATTEMPTS) throw new ConcurrentUpdateError(`the balance of workspace ${input.workspaceId}`);
          continue;
        }
        if (!(err instanceof CreditElsewhereSignal)) throw err;
        gathered += 1;
        await new DynamoLedger(this.writer, this.ledgerTables()).moveCreditTo(input.workspaceId, 0, need, at);
      }
    }
  }

  async statement(workspaceId: string, limit: number): Promise<StatementEntry[]> {
    checkWorkspaceId(workspaceId);
    if ((await getWorkspace(this.ctx, workspaceId)) === undefined) throw new WorkspaceNotFoundError(workspaceId);
    const entries: StatementEntry[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const out = await this.ctx.doc.send(
        new QueryCommand({
          TableName: table(this.ctx, 'ledger'),
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
          ExpressionAttributeValues: { ':pk': ledgerPk(workspaceId), ':prefix': STATEMENT_PREFIX },
          ScanIndexForward: false,
          ConsistentRead: true,
          Limit: limit,
          ExclusiveStartKey: start,
        }),
      );
      entries.push(...(out.Items ?? []).map((i) => toEntry(i)));
      start = out.LastEvaluatedKey;
    } while (start !== undefined && entries.length < limit);
    return entries.slice(0, limit);
  }
}

/**
 * The change a top-up or an adjustment makes to slice 0's `BALANCE`: `available` and `credited`
 * move together, so `credited = available + held + spent` keeps holding. The item exists only for
 * a created workspace; the ceiling keeps every ledger figure (each at most `credited`) an exact
 * JavaScript integer. With `needMicros`, `available` must cover it: `available` excludes what is
 * held, so keeping it at or above zero keeps the balance at or above what running requests hold.
 */
function balanceChange(ledger: string, pk: string, deltaMicros: number, seq: number, needMicros?: number, mayMake = false): TransactItem {
  // Outside the stage's home region, the region's slice 0 is made by its first credit (the
  // workspace's existence was read from the home region's slice 0 in this replica).
  const exists = mayMake ? '(attribute_not_exists(creditedMicros) OR creditedMicros <= :ceiling)' : 'attribute_exists(pk) AND creditedMicros <= :ceiling';
  return {
    Update: {
      TableName: ledger,
      Key: { pk, sk: BALANCE },
      UpdateExpression: 'ADD availableMicros :d, creditedMicros :d, statementSeq :one',
      // `statementSeq`: no other top-up or adjustment since the balance this one reports was read.
      ConditionExpression:
        `${exists}${needMicros === undefined ? '' : ' AND availableMicros >= :need'} AND ` +
        (seq === 0 ? '(attribute_not_exists(statementSeq) OR statementSeq = :seq)' : 'statementSeq = :seq'),
      ExpressionAttributeValues: {
        ':d': deltaMicros,
        ':one': 1,
        ':seq': seq,
        ':ceiling': Number.MAX_SAFE_INTEGER - Math.max(0, deltaMicros),
        ...(needMicros === undefined ? {} : { ':need': needMicros }),
      },
    },
  };
}

/**
 * A top-up's spread as a give: the writing region's credit transfer item (`XFER#<ws>`, tagged by
 * the lens outside the home region) counts each part as sent to its region, stamped so the
 * receiving region's transfer agent takes it (`lambdas/transfer/agent.ts`); that agent credits it
 * there once. The counters only grow, so no condition: an answer racing it is conditioned on the
 * `sent` it read, and reads again.
 */
function spreadSend(ledger: string, workspaceId: string, region: string, parts: readonly { readonly peer: string; readonly micros: number }[]): TransactItem {
  const u = new UpdateBuilder();
  u.set(`${u.a('region')} = ${u.v(region)}, ${u.a('ws')} = ${u.v(workspaceId)}`);
  for (const p of parts) u.add(counterNames(p.peer).sent, p.micros);
  return { Update: { TableName: ledger, Key: { pk: transferPk(workspaceId), sk: quantityId({ kind: 'credit' }) }, ...u.build() } };
}

/** The statement line of a top-up or an adjustment, once per request id. */
function statementPut(ledger: string, pk: string, entry: StatementEntry): TransactItem {
  return { Put: { TableName: ledger, Item: { pk, sk: `${STATEMENT_PREFIX}${new Date(entry.at).toISOString()}#${entry.requestId}`, ...entry }, ConditionExpression: 'attribute_not_exists(pk)' } };
}

/** Raised inside a credit when the reference marker already exists; never leaves this module. */
class ReferenceTakenSignal extends Error {}

/** Raised inside an adjustment when slice 0 is short but the whole workspace is not; never leaves this module. */
class CreditElsewhereSignal extends Error {}

/** Raised inside a top-up or an adjustment when another one landed after its read; never leaves this module. */
class SequenceMovedSignal extends Error {}

/** Times a top-up or an adjustment reads again after others landed first, before it gives up (409 concurrent_update). */
const SEQUENCE_ATTEMPTS = 20;

/** Times an adjustment gathers credit into slice 0 before the whole's shortfall is its answer (admissions may take it meanwhile). */
const GATHER_ATTEMPTS = 5;

/**
 * Adds `minor` minor units of credit outside the management API (local mode's seed, tests):
 * the same write as an operator's top-up, attributed to `local`.
 */
export async function addCredit(ctx: AdminContext, input: { workspaceId: string; minor: number }): Promise<{ availableMicros: number }> {
  const micros = minorToMicros(input.minor, 'credit');
  const out = await new DynamoBalancePort(ctx).credit({
    workspaceId: input.workspaceId,
    micros,
    who: 'local',
    requestId: `seed_${randomBytes(8).toString('hex')}`,
  });
  return { availableMicros: out.balance.availableMicros };
}

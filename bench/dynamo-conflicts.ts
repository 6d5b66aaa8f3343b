/**
 * DynamoDB's transaction conflicts, for a proxy in front of DynamoDB Local (which runs one
 * transaction at a time and never cancels one for a conflict). The rules are DynamoDB's
 * ("Transaction conflict handling in DynamoDB", the developer guide):
 *
 * - a TransactWriteItems is cancelled (`TransactionCanceledException`, reason
 *   `TransactionConflict` on each item met) when one of its items is part of another ongoing
 *   TransactWriteItems;
 * - a PutItem, UpdateItem or DeleteItem on an item of an ongoing TransactWriteItems fails with
 *   `TransactionConflictException`;
 * - a TransactGetItems is cancelled when one of its items is part of an ongoing TransactWriteItems
 *   or single-item write.
 *
 * What "ongoing" means is the model's one parameter: a write holds its items from the moment it
 * is passed on until its reply or `windowMs` later, whichever is first. DynamoDB Local answers
 * after a queue that a loaded machine makes long, so its reply alone would hold items for that
 * queue's length, not for a transaction's own time in DynamoDB: the window stands for the latter.
 */

/** What a call meets on its way to DynamoDB Local. */
export type Passage =
  | { readonly passed: true; readonly release: () => void }
  /** Indexes (in the call's item order) of the items another ongoing write holds. */
  | { readonly passed: false; readonly conflicts: readonly number[] };

interface Hold {
  readonly until: number;
  released: boolean;
  readonly transactional: boolean;
}

/** The items ongoing writes hold, and the rules above; `ids` name items (table and key). */
export class ItemLocks {
  private readonly held = new Map<string, Set<Hold>>();

  constructor(
    readonly windowMs: number,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** A TransactWriteItems: cancelled if any item is part of an ongoing transaction; else holds them all. */
  transactWrite(ids: readonly string[]): Passage {
    const conflicts = this.met(ids, true);
    return conflicts.length > 0 ? { passed: false, conflicts } : { passed: true, release: this.hold(ids, true) };
  }

  /** A PutItem, UpdateItem or DeleteItem: refused if its item is part of an ongoing transaction; else holds it against reads. */
  singleWrite(id: string): Passage {
    const conflicts = this.met([id], true);
    return conflicts.length > 0 ? { passed: false, conflicts } : { passed: true, release: this.hold([id], false) };
  }

  /** A TransactGetItems: cancelled if any item is part of an ongoing write of either kind. Holds nothing. */
  transactGet(ids: readonly string[]): Passage {
    const conflicts = this.met(ids, false);
    return conflicts.length > 0 ? { passed: false, conflicts } : { passed: true, release: () => undefined };
  }

  /** Items held now (for tests). */
  holding(): number {
    let n = 0;
    for (const id of [...this.held.keys()]) if (this.active(id, false)) n += 1;
    return n;
  }

  private met(ids: readonly string[], transactionalOnly: boolean): number[] {
    const out: number[] = [];
    ids.forEach((id, i) => {
      if (this.active(id, transactionalOnly)) out.push(i);
    });
    return out;
  }

  private active(id: string, transactionalOnly: boolean): boolean {
    const holds = this.held.get(id);
    if (holds === undefined) return false;
    const now = this.clock();
    let found = false;
    for (const h of holds) {
      if (h.released || now >= h.until) holds.delete(h);
      else if (!transactionalOnly || h.transactional) found = true;
    }
    if (holds.size === 0) this.held.delete(id);
    return found;
  }

  private hold(ids: readonly string[], transactional: boolean): () => void {
    const h: Hold = { until: this.clock() + this.windowMs, released: false, transactional };
    for (const id of ids) {
      let holds = this.held.get(id);
      if (holds === undefined) {
        holds = new Set();
        this.held.set(id, holds);
      }
      holds.add(h);
    }
    return () => {
      h.released = true;
      for (const id of ids) {
        const holds = this.held.get(id);
        holds?.delete(h);
        if (holds?.size === 0) this.held.delete(id);
      }
    };
  }
}

const PREFIX = 'com.amazonaws.dynamodb.v20120810#';

/** DynamoDB's reply to a transaction cancelled for conflicts: a reason per item, in order. */
export function cancelledForConflict(items: number, conflicts: readonly number[]): { __type: string; Message: string; CancellationReasons: { Code: string; Message?: string }[] } {
  const met = new Set(conflicts);
  const reasons = Array.from({ length: items }, (_, i) => (met.has(i) ? { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' } : { Code: 'None' }));
  return {
    __type: `${PREFIX}TransactionCanceledException`,
    Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(', ')}]`,
    CancellationReasons: reasons,
  };
}

/** DynamoDB's reply to a single-item write on an item an ongoing transaction holds. */
export function writeConflict(): { __type: string; message: string } {
  return { __type: `${PREFIX}TransactionConflictException`, message: 'Transaction is ongoing for the item' };
}

/**
 * Per-thread event sequence numbers. Every thread-scoped notification, deltas included, takes the
 * next number; deltas are not stored, so the counter cannot be rebuilt from the event log. Numbers
 * are therefore reserved in blocks recorded on the thread row: after a restart the counter resumes
 * above everything a previous process may have handed out, so `seq` stays strictly increasing
 * across processes at the cost of one write per block, not one per delta.
 *
 * With several processes (issue 12) numbers are handed out only under the thread's lease: taking
 * a lease another process held since restarts the counter above the stored reservation (every
 * holder persists its reservation, under the fence, before handing numbers out), never from what
 * this process remembered.
 */
/**
 * Numbers per reservation; a new block is reserved when half of it is left. Each reservation a
 * stream of deltas needs is a transaction of its own (fenced under a lease): at 1 024, a turn of
 * 1 000 text chunks took 4.5 transactions instead of 3 (bench/RESULTS.md, issue 33). A takeover or
 * a restart skips what is left of a block: gaps in `seq` are allowed, only the order matters.
 */
export const SEQ_BLOCK = 4096;

export class SeqCounter {
  private nextSeq: number;
  private reserved: number;

  /** `persistedReservation`: threads.seq_reserved as loaded. The new block starts above it. */
  constructor(persistedReservation: number) {
    this.nextSeq = persistedReservation + 1;
    this.reserved = persistedReservation;
  }

  /** The last number handed out (0 when none). */
  get current(): number {
    return this.nextSeq - 1;
  }

  /** The highest number covered by the reservation asked for (persisted or not yet). */
  get reservedUpTo(): number {
    return this.reserved;
  }

  next(): number {
    return this.nextSeq++;
  }

  /**
   * The reservation to persist before numbers up to `current + headroom` are used, or null when
   * the persisted one still covers them.
   */
  reservationNeeded(headroom = SEQ_BLOCK / 2): number | null {
    if (this.nextSeq + headroom <= this.reserved) return null;
    this.reserved = this.nextSeq + SEQ_BLOCK;
    return this.reserved;
  }
}

/**
 * The stream idle timeout (`APP_SERVER_STREAM_IDLE_TIMEOUT_MS`, DESIGN.md §3.6): a model that
 * sends nothing — no response headers, or a stream that stalls half-way — for that long is a
 * retryable stream failure, never a hang. One wrapper for every adapter: the clock restarts on
 * every streamed event and stops while the caller handles one (recording it is not the model's
 * silence). On expiry the request is aborted through its own signal (not the caller's, which
 * would read as a user cancel) and the failure is reported as `network` (nothing arrived yet) or
 * `streamIncomplete` (the stream had started), both retried by the loop.
 */
import { ProviderError, type ModelProvider, type ModelRequest, type ProviderStreamEvent } from "./types.js";

export function withIdleTimeout(provider: ModelProvider, idleMs: number): ModelProvider {
  if (!(idleMs > 0) || !Number.isFinite(idleMs)) return provider;
  return {
    id: provider.id,
    stream: (request, signal) => streamWithIdleTimeout(provider, request, signal, idleMs),
  };
}

async function* streamWithIdleTimeout(provider: ModelProvider, request: ModelRequest, signal: AbortSignal, idleMs: number): AsyncGenerator<ProviderStreamEvent> {
  const inner = new AbortController();
  const forward = () => inner.abort(signal.reason);
  if (signal.aborted) forward();
  else signal.addEventListener("abort", forward, { once: true });
  let timedOut = false;
  // One timer for the whole stream rather than a new one per event (issue 16: a timer per delta
  // was measurable at 25k deltas/s). It checks, when it fires, how long the current wait has
  // lasted, and re-arms itself for the rest; fired while no wait is running, it lapses and the
  // next wait starts a new one.
  let timer: NodeJS.Timeout | undefined;
  let waitingSince = -1;
  const check = () => {
    timer = undefined;
    if (waitingSince < 0) return;
    const waited = performance.now() - waitingSince;
    if (waited >= idleMs) {
      timedOut = true;
      inner.abort();
      return;
    }
    timer = setTimeout(check, idleMs - waited);
  };
  const arm = () => {
    waitingSince = performance.now();
    timer ??= setTimeout(check, idleMs);
  };
  let events = 0;
  const idleError = (cause?: unknown) =>
    events === 0
      ? new ProviderError("network", `${provider.id}: no response from the model within ${idleMs} ms (stream idle timeout)`, { cause })
      : new ProviderError("streamIncomplete", `${provider.id}: the model stream stalled: nothing received for ${idleMs} ms (stream idle timeout)`, { cause });
  const iterator = provider.stream(request, inner.signal)[Symbol.asyncIterator]();
  let finished = false;
  try {
    for (;;) {
      arm();
      let next: IteratorResult<ProviderStreamEvent>;
      try {
        next = await iterator.next();
      } catch (err) {
        if (timedOut && !signal.aborted) throw idleError(err);
        throw err;
      } finally {
        waitingSince = -1; // the clock stops while the caller handles the event
      }
      if (next.done) {
        finished = true;
        return;
      }
      // An adapter that ended quietly after our abort must not pass for a finished stream.
      if (timedOut && !signal.aborted) throw idleError();
      events++;
      yield next.value;
    }
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", forward);
    // The caller stopped early (or the stream failed): release the request. Not after the stream
    // ended by itself: its response is read to the end and released already, and an abort then
    // only built two AbortErrors with their stacks (ours and the SDK's listener's), ~1 % of the
    // server's CPU at 500 streams (issue 33 item 1).
    if (!finished && !inner.signal.aborted) inner.abort();
    // The stream's outcome (its end, the error being thrown, the caller's break) is already decided
    // and the request aborted: the adapter's cleanup failing on top adds nothing the caller could act on.
    await iterator.return?.().catch(() => {});
  }
}

/** Waiting that a stop can cut short (start-up steps that SIGTERM must not wait out). */

/** Rejects as soon as `signal` fires; whatever `promise` still yields afterwards goes to `dispose`. */
export function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined, dispose: (value: T) => unknown = () => {}): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      reject(signal.reason);
      // The caller already has its rejection (the abort) and is giving up on this step: the step's
      // late failure, or a failure disposing of what it yielded late, has nobody left to go to.
      promise.then(dispose).catch(() => {});
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/**
 * `signal`, also aborted `ms` from now (with a TimeoutError, as AbortSignal.timeout does); call
 * `clear` when done so the timer goes. Not `AbortSignal.any([signal, AbortSignal.timeout(ms)])`:
 * on Node 20 the combined signal holds its sources weakly, so a garbage collection during the wait
 * (the idle collection of memory-release.ts runs exactly then) takes the timeout signal with it and
 * the deadline never fires. The timer here holds the controller strongly until it fires or is cleared.
 */
export function withDeadline(signal: AbortSignal | undefined, ms: number): { signal: AbortSignal; clear: () => void } {
  const deadline = new AbortController();
  const onAbort = () => deadline.abort(signal!.reason);
  const timer = setTimeout(() => deadline.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")), ms);
  // Unreferenced like AbortSignal.timeout's: a pending deadline alone does not keep the process up.
  timer.unref();
  if (signal?.aborted) onAbort();
  else signal?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: deadline.signal,
    clear: () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    },
  };
}

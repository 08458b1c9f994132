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

/** Retry timing for transient provider failures (DESIGN.md §3.5). */

export interface RetryPolicy {
  /** Retries after the first attempt (0 disables retrying). */
  maxRetries: number;
  /** First backoff delay; doubles each retry. */
  baseDelayMs: number;
  /** Cap for the exponential backoff. */
  maxDelayMs: number;
  /** Cap for a provider's Retry-After (a hostile or broken value must not park a turn for hours). */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 4, baseDelayMs: 1000, maxDelayMs: 30_000, maxRetryAfterMs: 120_000 };

/** Delay before retry number `retry` (1-based): Retry-After when the provider sent one, else 1 s, 2 s, 4 s … capped. */
export function retryDelayMs(policy: RetryPolicy, retry: number, retryAfterMs: number | null): number {
  if (retryAfterMs !== null && retryAfterMs >= 0) return Math.min(retryAfterMs, policy.maxRetryAfterMs);
  return Math.min(policy.baseDelayMs * 2 ** (retry - 1), policy.maxDelayMs);
}

/** Sleeps `ms`, or rejects early when `signal` fires. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

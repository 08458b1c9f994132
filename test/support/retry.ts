/**
 * Retries `check` every `pauseMs` until it stops throwing (or `attempts` are used up: then its last
 * error is thrown). For effects that come with no reply to wait for, e.g. a socket close or a
 * lease given back by a step after turn/completed. (cluster.ts `eventually` waits for a truthy
 * value instead.)
 */
export async function untilItHolds<T>(check: () => T | Promise<T>, attempts = 200, pauseMs = 25): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await check();
    } catch (err) {
      if (i >= attempts) throw err;
      await new Promise((r) => setTimeout(r, pauseMs));
    }
  }
}

import v8 from "node:v8";
import vm from "node:vm";
import { describe, expect, it } from "vitest";
import { withDeadline } from "../src/abortable.js";

/** V8's full collection, reached the way memory-release.ts reaches it. */
function collectGarbage(): void {
  v8.setFlagsFromString("--expose-gc");
  (vm.runInNewContext("gc") as () => void)();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves with the reason once `signal` aborts; the listener is all that refers to it. */
function abortReason(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(signal.reason), { once: true }));
}

describe("withDeadline", () => {
  it("fires its deadline even when a garbage collection runs during the wait", async () => {
    // The approval timeout once never fired: AbortSignal.any held AbortSignal.timeout weakly and
    // the server's idle collection took it. Here only the listener and the timer hold anything.
    const parent = new AbortController();
    const reason = (() => abortReason(withDeadline(parent.signal, 50).signal))();
    collectGarbage();
    await sleep(10);
    collectGarbage();
    const got = await reason;
    expect(got).toBeInstanceOf(DOMException);
    expect((got as DOMException).name).toBe("TimeoutError");
    expect(parent.signal.aborted).toBe(false);
  });

  it("aborts with the caller's reason when the caller's signal aborts first", async () => {
    const parent = new AbortController();
    const { signal, clear } = withDeadline(parent.signal, 60_000);
    const reason = abortReason(signal);
    parent.abort(new Error("interrupted"));
    expect(await reason).toEqual(new Error("interrupted"));
    clear();
  });

  it("is aborted at once when the caller's signal already is", () => {
    const parent = new AbortController();
    parent.abort("gone");
    const { signal, clear } = withDeadline(parent.signal, 60_000);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe("gone");
    clear();
  });

  it("never fires once cleared, and no longer follows the caller's signal", async () => {
    const parent = new AbortController();
    const { signal, clear } = withDeadline(parent.signal, 20);
    clear();
    await sleep(80);
    parent.abort();
    expect(signal.aborted).toBe(false);
  });

  it("works without a caller's signal", async () => {
    const { signal } = withDeadline(undefined, 10);
    const got = await abortReason(signal);
    expect((got as DOMException).name).toBe("TimeoutError");
  });
});

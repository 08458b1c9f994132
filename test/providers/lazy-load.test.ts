/**
 * The provider adapters load on the first model call (src/providers/index.ts, issue 33 item 3).
 * A load that fails says which provider could not load and why, and the next call tries again.
 */
import { describe, expect, it } from "vitest";
import { LazyProvider } from "../../src/providers/index.js";
import type { ModelProvider, ProviderStreamEvent } from "../../src/providers/types.js";

async function drain(p: ModelProvider): Promise<ProviderStreamEvent[]> {
  const events: ProviderStreamEvent[] = [];
  for await (const e of p.stream({ model: "m", instructions: "", input: [], tools: [] } as never, new AbortController().signal)) events.push(e);
  return events;
}

describe("LazyProvider", () => {
  it("a failed load names the provider and the cause; the next call loads again and streams", async () => {
    let loads = 0;
    const done = { type: "done" } as unknown as ProviderStreamEvent;
    const working: ModelProvider = {
      id: "openai",
      async *stream() {
        yield done;
      },
    };
    const lazy = new LazyProvider("openai", async () => {
      loads++;
      if (loads === 1) throw new Error("Cannot find package 'openai'");
      return working;
    });
    await expect(drain(lazy)).rejects.toThrow(/could not load the openai provider.*Cannot find package 'openai'/);
    expect(await drain(lazy)).toEqual([done]);
    expect(await drain(lazy)).toEqual([done]);
    expect(loads).toBe(2); // loaded once it worked, not per call
  });
});

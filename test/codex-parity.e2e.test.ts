/**
 * Smaller differences from `codex app-server` 0.171 seen on the TUI's screen (issue 25 item 4),
 * over a real WebSocket: the token-usage notification carries the model's context window (the
 * TUI's /status "Context window"), and a fork keeps its source's name (the TUI's footer after
 * /fork). The shell invocation in `commandExecution.command` is covered by the approval tests.
 */
import { afterEach, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { BACKENDS } from "./support/db.js";
import { startTurnHarness, text, turnCompleted, type ProviderName, type TurnHarness } from "./support/turns.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

describe("Codex parity: context window and fork names", () => {
  let h: TurnHarness | undefined;
  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    await h?.close();
    client = h = undefined;
  });

  async function windowReported(provider: ProviderName, contextWindow?: number): Promise<unknown> {
    h = await startTurnHarness(backend, provider, contextWindow ? { turns: { contextWindow } } : {});
    client = await TestClient.initialized(h.ts.url);
    const { thread } = await client.request("thread/start", {});
    h.mock.enqueue({ text: "hi" });
    const { turn } = await client.request("turn/start", { threadId: thread.id, input: text("hello") });
    await turnCompleted(client, turn.id);
    const usage = client.notifications("thread/tokenUsage/updated").at(-1)!;
    await client.close();
    await h.close();
    client = h = undefined;
    return usage.params.tokenUsage.modelContextWindow;
  }

  it("thread/tokenUsage/updated carries modelContextWindow: the provider's, or the configured one; none guessed for openai-chat", async () => {
    expect(await windowReported("openai")).toBe(272_000);
    expect(await windowReported("anthropic")).toBe(200_000);
    expect(await windowReported("openai-chat")).toBeNull();
    expect(await windowReported("openai-chat", 32_768)).toBe(32_768);
  });

  it("a fork keeps the source's name, as Codex's fork does (a fork of the fork too)", async () => {
    h = await startTurnHarness(backend, "openai");
    client = await TestClient.initialized(h.ts.url);
    const { thread } = await client.request("thread/start", {});
    await client.request("thread/name/set", { threadId: thread.id, name: "My thread" });
    const fork = (await client.request("thread/fork", { threadId: thread.id })).thread;
    expect(fork).toMatchObject({ name: "My thread", forkedFromId: thread.id });
    const again = (await client.request("thread/fork", { threadId: fork.id })).thread;
    expect(again.name).toBe("My thread");
    expect((await client.request("thread/read", { threadId: fork.id })).thread.name).toBe("My thread");
    // Renaming the fork leaves the source alone.
    await client.request("thread/name/set", { threadId: fork.id, name: "Forked" });
    expect((await client.request("thread/read", { threadId: thread.id })).thread.name).toBe("My thread");
    const { thread: unnamed } = await client.request("thread/start", {});
    expect((await client.request("thread/fork", { threadId: unnamed.id })).thread.name).toBeNull();
  });
});

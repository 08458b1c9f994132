/**
 * A turn whose model endpoint cannot be reached: it fails at once, saying which URL, why and what
 * to do — one `error` notification, not one per retry of something retrying cannot fix.
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { BACKENDS } from "./support/db.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { turnCompleted } from "./support/turns.js";

const text = (t: string) => [{ type: "text", text: t, text_elements: [] }];

describe.each(BACKENDS)("a model endpoint nothing listens on (%s)", (backend) => {
  let ts: TestServer;
  let base: string;
  beforeAll(async () => {
    const s = net.createServer();
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(s.address() as net.AddressInfo).port}/v1`;
    await new Promise((r) => s.close(r));
    ts = await startTestServer(backend, {
      modelProvider: "openai-chat",
      model: "llama3.1",
      providers: { "openai-chat": { baseURL: base, apiKey: "test-key" } },
      // Retries as fast as they go: the verdict is how many there are, not how long they take.
      turns: { retry: { maxRetries: 4, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 50 } },
    });
  });
  afterAll(async () => ts?.close());

  it("fails the turn at once with one error naming the URL, the cause and the fix", async () => {
    const c = await TestClient.initialized(ts.url);
    try {
      const { thread } = await c.request("thread/start", {});
      const { turn } = await c.request("turn/start", { threadId: thread.id, input: text("hello") });
      const done = await turnCompleted(c, turn.id);
      const message = `openai-chat: cannot reach ${base}: connection refused (ECONNREFUSED) — nothing listens there: start the model server, or fix OPENAI_BASE_URL`;
      expect(done.params.turn.status).toBe("failed");
      expect(done.params.turn.error).toMatchObject({ message, codexErrorInfo: { httpConnectionFailed: { httpStatusCode: null } } });
      const errors = c.notifications().filter((f) => f.method === "error" && f.params.turnId === turn.id);
      expect(errors.map((f) => [f.params.willRetry, f.params.error.message])).toEqual([[false, message]]);
    } finally {
      await c.close();
    }
  });
});

/**
 * Outgoing frames vs the input limit: an input at the default limit is echoed (userMessage in
 * item/started, item/completed, turn/completed) in frames a client with a 1 MiB frame limit
 * (python websockets' default) accepts; one byte more is refused with -32602 before anything runs.
 */
import { afterEach, describe, expect, it } from "vitest";
import { COMMON_CLIENT_FRAME_LIMIT, DEFAULT_MAX_INPUT_BYTES } from "../src/transport/frame-limits.js";
import { TestClient } from "./support/client.js";
import { startTurnHarness, turnCompleted, type TurnHarness } from "./support/turns.js";

const clientInfo = { name: "frame-size-test", title: null, version: "1.0.0" };

/** A text input whose JSON (as the server measures it) is exactly `bytes` long, with multi-byte characters. */
function inputOfBytes(bytes: number) {
  const empty = Buffer.byteLength(JSON.stringify([{ type: "text", text: "", text_elements: [] }]));
  const body = bytes - empty;
  const euros = Math.floor(body / 3 / 2); // "€" is 3 bytes in UTF-8
  const text = "€".repeat(euros) + "x".repeat(body - euros * 3);
  const input = [{ type: "text", text, text_elements: [] }];
  expect(Buffer.byteLength(JSON.stringify(input))).toBe(bytes);
  return input;
}

describe("frame sizes", () => {
  let h: TurnHarness | undefined;
  let c: TestClient | undefined;
  afterEach(async () => {
    c?.ws.terminate();
    await h?.close();
    h = c = undefined;
  });

  it("echoes an input at the default limit in frames within 1 MiB; one byte more is refused", { timeout: 120_000 }, async () => {
    expect(DEFAULT_MAX_INPUT_BYTES).toBeLessThan(COMMON_CLIENT_FRAME_LIMIT);
    h = await startTurnHarness("pglite", "openai");
    // The client refuses (1009) any frame over 1 MiB, as python websockets does by default.
    c = await TestClient.connect(h.ts.url, { maxPayload: COMMON_CLIENT_FRAME_LIMIT });
    const sizes: number[] = [];
    c.ws.on("message", (data: Buffer) => sizes.push(data.length));
    await c.request("initialize", { clientInfo });
    c.notify("initialized", {});
    const threadId = (await c.request("thread/start", {})).thread.id;

    const tooBig = await c.requestRaw("turn/start", { threadId, input: inputOfBytes(DEFAULT_MAX_INPUT_BYTES + 1) });
    expect(tooBig.error).toMatchObject({ code: -32602, data: { bytes: DEFAULT_MAX_INPUT_BYTES + 1, limit: DEFAULT_MAX_INPUT_BYTES } });

    h.mock.enqueue({ text: ["done"] });
    const { turn } = await c.request("turn/start", { threadId, input: inputOfBytes(DEFAULT_MAX_INPUT_BYTES) });
    const completed = await turnCompleted(c, turn.id, 60_000);
    expect(completed.params.turn.status).toBe("completed");
    const echoed = c.notifications("item/completed").find((f) => f.params.item.type === "userMessage");
    expect(Buffer.byteLength(JSON.stringify(echoed!.params.item.content))).toBe(DEFAULT_MAX_INPUT_BYTES);
    expect(c.closeCode).toBeNull();
    const largest = Math.max(...sizes);
    expect(largest).toBeGreaterThan(DEFAULT_MAX_INPUT_BYTES); // the echo really was that large
    expect(largest).toBeLessThanOrEqual(COMMON_CLIENT_FRAME_LIMIT);
    console.log(`largest frame ${largest} bytes for an input of ${DEFAULT_MAX_INPUT_BYTES} bytes (limit ${COMMON_CLIENT_FRAME_LIMIT})`);
  });
});

/**
 * A hook configuration with problems is reported to clients by hooks/list (its `errors`), also
 * when no hook in it is usable, and the server still starts and runs turns.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const provider = "openai" as const;

describe("hook configuration problems", () => {
  let h: TurnHarness | undefined;
  let client: TestClient | undefined;
  let dir: string | undefined;
  let saved: string | undefined;
  afterEach(async () => {
    if (saved === undefined) delete process.env.APP_SERVER_HOOKS_CONFIG;
    else process.env.APP_SERVER_HOOKS_CONFIG = saved;
    await client?.close();
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    h = client = dir = undefined;
  });

  async function startWith(hooksJson: string) {
    dir = mkdtempSync(path.join(os.tmpdir(), "aas-hooks-config-"));
    writeFileSync(path.join(dir, "hooks.json"), hooksJson);
    saved = process.env.APP_SERVER_HOOKS_CONFIG;
    process.env.APP_SERVER_HOOKS_CONFIG = path.join(dir, "hooks.json");
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
    const { data } = await client.request("hooks/list", { cwds: [dir] });
    return (data as any[])[0];
  }

  it.each([
    ["not JSON", "{ hooks", /hooks\.json is not valid JSON/],
    ["no usable hook (a bad matcher)", JSON.stringify({ hooks: { preToolUse: [{ matcher: "(", hooks: [{ type: "command", command: "true" }] }] } }), /^preToolUse\[0\]\.matcher: /],
  ])("%s: hooks/list reports it, with no hooks; turns still run", async (_name, hooksJson, message) => {
    const entry = await startWith(hooksJson);
    expect(entry.hooks).toEqual([]);
    expect(entry.errors).toEqual([{ path: path.join(dir!, "hooks.json"), message: expect.stringMatching(message) }]);
    const threadId = (await client!.request("thread/start", { cwd: dir, approvalPolicy: "never" })).thread.id;
    h!.mock.enqueue({ text: "Done." });
    const { turn } = await client!.request("turn/start", { threadId, input: text("go") });
    expect((await turnCompleted(client!, turn.id, 30_000)).params.turn.status).toBe("completed");
  });

  it("a good file next to nothing wrong: no errors", async () => {
    const entry = await startWith(JSON.stringify({ hooks: { stop: [{ hooks: [{ type: "command", command: "true" }] }] } }));
    expect(entry.errors).toEqual([]);
    expect(entry.hooks.map((x: any) => x.eventName)).toEqual(["stop"]);
  });
});

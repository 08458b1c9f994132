// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * The approval table (docs/approvals.md, where the README points), one test per cell, over a real
 * WebSocket with a plain JSON-RPC client: approval policy × sandbox × the shell tool's
 * `sandbox_permissions`, for a command the sandbox does not allow (it appends to `.git/ran.txt`,
 * read-only in both sandboxed modes; the line count says how often it really ran). Each cell
 * checks what was asked (and why), where the command ran, and what the model was told — and that
 * docs/approvals.md holds exactly that cell's row.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { BACKENDS } from "./support/db.js";
import { COMMAND_APPROVAL, lastToolResult, makeWorkspace } from "./support/approvals.js";
import { CELLS, tableRow, type Cell } from "./support/approval-table.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const COMMAND = "echo run >> .git/ran.txt";
const JUSTIFICATION = "Do you want to write into .git?";
const DOC = readFileSync(new URL("../docs/approvals.md", import.meta.url), "utf8");

describe("approval table: policy × sandbox × sandbox_permissions (a command the sandbox does not allow)", () => {
  let h: TurnHarness;
  let client: TestClient;
  const workspaces: Array<() => void> = [];

  beforeAll(async () => {
    h = await startTurnHarness(backend, "openai");
    client = await TestClient.initialized(h.ts.url);
    client.onServerRequest(COMMAND_APPROVAL, () => ({ decision: "accept" }));
  });
  afterAll(async () => {
    await client?.close();
    await h?.close();
    for (const cleanup of workspaces) cleanup();
  });

  const label = (c: Cell) => `${c.policy} / ${c.sandbox} / ${c.escalate ? "require_escalated" : "use_default"} → ${c.outcome}`;

  it.each(CELLS.map((c) => [label(c), c] as const))("%s", async (_label, cell) => {
    expect(DOC, "docs/approvals.md must hold this cell's row").toContain(tableRow(cell));
    const ws = makeWorkspace();
    workspaces.push(ws.cleanup);
    mkdirSync(path.join(ws.dir, ".git"));
    const ranFile = path.join(ws.dir, ".git", "ran.txt");
    const runs = () => (existsSync(ranFile) ? readFileSync(ranFile, "utf8").split("\n").filter(Boolean).length : 0);

    const { thread } = await client.request("thread/start", { cwd: ws.dir, approvalPolicy: cell.policy, sandbox: cell.sandbox });
    const args = cell.escalate ? { command: COMMAND, sandbox_permissions: "require_escalated", justification: JUSTIFICATION } : { command: COMMAND };
    const firstRequest = h.mock.requests.length;
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: args }] }, { text: "done" });
    const from = client.frames.length;
    const { turn } = await client.request("turn/start", { threadId: thread.id, input: text("write it") });
    const completed = await turnCompleted(client, turn.id, 30_000);
    expect(completed.params.turn.status).toBe("completed");

    const frames = client.frames.slice(from).filter((f) => f.params?.threadId === thread.id);
    const prompts = frames.filter((f) => f.method === COMMAND_APPROVAL && f.id !== undefined).map((f) => f.params);
    const started = frames.filter((f) => f.method === "item/started" && f.params.item.type === "commandExecution");
    const done = frames.find((f) => f.method === "item/completed" && f.params.item.type === "commandExecution")?.params.item;
    const output = frames.filter((f) => f.method === "item/commandExecution/outputDelta").map((f) => f.params.delta).join("");
    const model = lastToolResult(h.mock, "openai", firstRequest + 1);

    switch (cell.outcome) {
      case "runs":
        expect(prompts).toEqual([]);
        expect(done.status).toBe("completed");
        expect(runs()).toBe(1);
        expect(model).toMatch(/^Exit code: 0/);
        break;
      case "asked-runs":
        expect(prompts).toHaveLength(1);
        expect(prompts[0].reason).toBe(cell.escalate ? JUSTIFICATION : "the approval policy is untrusted and this command is not on the read-only allow list");
        expect(done.status).toBe("completed");
        expect(runs()).toBe(1);
        break;
      case "asked-retried":
      case "denied-asked-retried":
        expect(prompts).toHaveLength(1);
        expect(prompts[0].reason).toMatch(cell.outcome === "asked-retried" ? /approval policy is untrusted/ : new RegExp(`failed inside the ${cell.sandbox} sandbox`));
        expect(output).toMatch(/Read-only file system[\s\S]*\[running again without the sandbox\]/);
        expect(done.status).toBe("completed");
        expect(runs()).toBe(1);
        expect(model).toMatch(/^Exit code: 0/);
        break;
      case "asked-escalated":
        expect(prompts).toHaveLength(1);
        expect(prompts[0]).toMatchObject({ reason: JUSTIFICATION, command: `/bin/bash -lc 'echo run >> .git/ran.txt'`, cwd: ws.dir });
        expect(output).not.toMatch(/Read-only file system/);
        expect(done.status).toBe("completed");
        expect(runs()).toBe(1);
        break;
      case "denied-hint":
      case "denied-never":
        expect(prompts).toEqual([]);
        expect(done).toMatchObject({ status: "failed", exitCode: 1 });
        expect(runs()).toBe(0);
        expect(model).toMatch(/Read-only file system/);
        expect(model).toMatch(cell.outcome === "denied-hint" ? /sandbox_permissions "require_escalated" and a justification/ : /approval policy is "never": it cannot run outside the sandbox/);
        break;
      case "refused":
        expect(prompts).toEqual([]);
        expect(started).toEqual([]);
        expect(runs()).toBe(0);
        expect(model).toMatch(/approval policy is "never", so nobody can approve that/);
        break;
    }
  });
});

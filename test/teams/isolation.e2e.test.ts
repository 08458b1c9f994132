// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * Users' workspaces are apart (docs/teams.md): a confined user's commands (shell tool,
 * command/exec) and file tools do not see other users' roots — masked as the server's own secrets
 * are — while its own roots and everything else read as the sandbox mode says. The owner reads its
 * own files; the local admin reads everyone's.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { toolResultTexts } from "../support/approvals.js";
import { BACKENDS } from "../support/db.js";
import { text, turnCompleted } from "../support/turns.js";
import type { TestClient } from "../support/client.js";
import { SERVER_TOKEN, startTeamServer, type TeamServer } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const SECRET = "bob-only-secret-7c1e";

describe("users' workspaces are apart", () => {
  let t: TeamServer;
  let secretFile: string;
  beforeEach(async () => {
    t = await startTeamServer(backend);
    secretFile = path.join(t.users.bob.root!, "secret.md");
    writeFileSync(secretFile, `${SECRET}\n`);
    writeFileSync(path.join(t.users.alice.root!, "mine.md"), "alice's own\n");
  });
  afterEach(async () => {
    await t.close();
  });

  /** Runs one turn whose model calls `shell` (cat) and `read_file` on `file`; returns the tool results the model got. */
  async function readAttempt(c: TestClient, file: string): Promise<string[]> {
    const thread = (await c.request("thread/start", { approvalPolicy: "never" })).thread.id;
    const before = t.mock.requests.length;
    t.mock.enqueue(
      { toolCalls: [{ name: "shell", arguments: { command: `cat ${file}; echo "exit=$?"` } }, { name: "read_file", arguments: { path: file } }] },
      { text: "done" },
    );
    const { turn } = await c.request("turn/start", { threadId: thread, input: text("read it") });
    await turnCompleted(c, turn.id, 30_000);
    return toolResultTexts(t.mock, "openai", before + 1);
  }

  it("hides other users' roots from a confined user's shell commands and file tools, not its own", async () => {
    const [alice, bob] = [await t.as(t.users.alice), await t.as(t.users.bob)];
    const asAlice = await readAttempt(alice, secretFile);
    expect(asAlice.join("\n")).not.toContain(SECRET);
    // (stdout and stderr are two pipes: their lines may come in either order)
    for (const part of [/No such file or directory/, /^exit=1$/m]) expect(asAlice[0]).toMatch(part);
    expect(asAlice[1]).toMatch(/hidden/);
    const aliceOwn = await readAttempt(alice, path.join(t.users.alice.root!, "mine.md"));
    expect(aliceOwn[0]).toContain("alice's own");
    const asBob = await readAttempt(bob, secretFile);
    expect(asBob[0]).toContain(SECRET);
    expect(asBob[1]).toContain(SECRET);
  });

  it("hides them from command/exec too; the local admin sees every workspace", async () => {
    const alice = await t.as(t.users.alice);
    const ran = await alice.request("command/exec", { command: ["cat", secretFile] });
    expect(ran.exitCode).not.toBe(0);
    expect(ran.stdout).not.toContain(SECRET);
    const local = await t.as(SERVER_TOKEN);
    const asAdmin = await readAttempt(local, secretFile);
    expect(asAdmin[0]).toContain(SECRET);
  });
});

// @needs-os-sandbox: the codex TUI's approved command runs through the server's OS sandbox
/**
 * The real `codex` 0.171 TUI with `--remote` against this server (through a recording relay) and
 * the mock model, in a detached tmux session of a fixed size, driven with `send-keys` and read
 * with `capture-pane -p`: start-up, a streamed answer, a command approval accepted with `y`, an
 * `@` file mention, a `!` shell command, `/compact`, `/review`, `codex resume --remote` (picker),
 * `codex fork --remote --last`, and the default mode of a fresh project (read-only, on-request): a
 * write command asks, `y` runs it once, Esc and `n` decline, "don't ask again" (`p`) lets the next
 * matching command run unasked; /status shows the context window and /fork keeps the thread's name.
 * Every session must be
 * conformant: no request answered -32601/-32602, every server message valid against Codex's schema.
 *
 * The TUI names a thread after its first prompt by running a throwaway ephemeral thread whose
 * prompt asks the model for a title; those model requests go to a second mock (a small router in
 * front of both), so the scripted replies of the real turns never race them.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CODEX_BIN, codexEnv, conformanceProblems, hasTmux, noCodex } from "./support/codex.js";
import { startRecordingRelay, type RecordingRelay } from "./support/recording-relay.js";
import { makeWorkspace } from "./support/approvals.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { mockProviders } from "./support/turns.js";
import { readmeCommand } from "./support/readme.js";

const tmuxMissing = !hasTmux();
if (tmuxMissing) {
  if (process.env.REQUIRE_CODEX === "1") throw new Error("REQUIRE_CODEX=1 but tmux is not installed (the TUI conformance tests need it)");
  console.warn("[skipped] codex TUI conformance tests: tmux is not installed");
}

const TITLE_PROMPT = "single-line task title";

/** Forwards each model request to `main`, or to `titles` when it is the TUI's title request. */
async function startModelRouter(main: MockModelServer, titles: MockModelServer): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const target = new URL((body.toString("utf8").includes(TITLE_PROMPT) ? titles : main).url);
      const headers = { ...req.headers, host: target.host, "content-length": String(body.length) };
      const up = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers }, (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      });
      up.on("error", () => res.destroy());
      res.on("close", () => up.destroy());
      up.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const SOCKET = `aas-tui-${process.pid}`;
const TUI_TOKEN = "tui-conformance-token-0123456789";
/**
 * tmux keeps its socket under $TMUX_TMPDIR/tmux-UID (default /tmp): pointed at the run's own
 * temporary directory, which the global teardown removes, so a run leaves nothing in /tmp.
 */
const TMUX_TMPDIR = process.env.AAS_TEST_RUN_TMPDIR || os.tmpdir();
const tmux = (...args: string[]) =>
  spawnSync("tmux", ["-L", SOCKET, "-f", "/dev/null", ...args], { encoding: "utf8", env: { ...process.env, TMUX_TMPDIR } });
/** tmux leaves its socket file behind after kill-server. */
const SOCKET_FILE = path.join(TMUX_TMPDIR, `tmux-${process.getuid?.() ?? 0}`, SOCKET);

describe.skipIf(noCodex || tmuxMissing)("codex TUI --remote in tmux (real codex 0.171)", { timeout: 400_000 }, () => {
  let ts: TestServer;
  let mock: MockModelServer;
  let titleMock: MockModelServer;
  let router: Awaited<ReturnType<typeof startModelRouter>>;
  let relay: RecordingRelay;
  let ws: ReturnType<typeof makeWorkspace>;
  let codex: ReturnType<typeof codexEnv>;
  let session: string | null = null;
  let sessions = 0;

  beforeAll(async () => {
    ws = makeWorkspace();
    mock = await startMockModelServer();
    titleMock = await startMockModelServer({ defaultReply: { text: "Mock title" } });
    router = await startModelRouter(mock, titleMock);
    const routed = { ...mock, url: router.url, anthropicBaseUrl: router.url, openaiBaseUrl: `${router.url}/v1` } as MockModelServer;
    // The server requires a token, as by default: the TUI sends it from APP_TOKEN, as the README says.
    ts = await startTestServer("pglite", { modelProvider: "openai", model: "mock-model", providers: mockProviders(routed), cwd: ws.dir, authToken: TUI_TOKEN });
    relay = await startRecordingRelay(ts.url);
    codex = codexEnv();
  });
  afterEach(() => {
    if (session) tmux("kill-session", "-t", session);
    session = null;
  });
  afterAll(async () => {
    tmux("kill-server");
    rmSync(SOCKET_FILE, { force: true });
    await relay?.close();
    await ts?.close();
    await router?.close();
    await mock?.close();
    await titleMock?.close();
    codex?.cleanup();
    ws?.cleanup();
  });

  /**
   * Starts the README's `codex --remote …` (with `args` added, the server's URL the relay's) in a new
   * detached 120×40 tmux session in the workspace.
   */
  function startTui(args: string[]): void {
    session = `tui${++sessions}`;
    const env = Object.entries({ ...codex.env, APP_TOKEN: TUI_TOKEN }).map(([k, v]) => `${k}=${v}`);
    const [program, ...readme] = readmeCommand("codex --remote ws://127.0.0.1:4500 --remote-auth-token-env APP_TOKEN").split(" ");
    expect(program).toBe("codex");
    const remote = readme.map((a) => (a === "ws://127.0.0.1:4500" ? relay.url : a));
    const r = tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", "-c", ws.dir, "env", "-i", ...env, CODEX_BIN, ...args, ...remote, ";", "set-option", "-t", session, "remain-on-exit", "on");
    expect(r.status, r.stderr).toBe(0);
  }
  const screen = () => tmux("capture-pane", "-p", "-t", session!).stdout;
  const keys = (...k: string[]) => expect(tmux("send-keys", "-t", session!, ...k).status).toBe(0);
  /** Types text literally, then Enter as a separate key press (as a person would). */
  async function submit(text: string) {
    keys("-l", text);
    await waitFor(() => screen().includes(text), `the typed text "${text}"`);
    keys("Enter");
  }
  /** Polls until `check` holds (bounded, generous: a loaded 2-core machine), else fails with the screen. */
  async function waitFor(check: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (check()) return;
      if (Date.now() > deadline) throw new Error(`waited for ${what}; the screen shows:\n${session ? screen() : "(no session)"}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  const waitForScreen = (re: RegExp) => waitFor(() => re.test(screen()), `${re} on the TUI screen`);
  const serverFrames = (from: number, method: string) => relay.frames.slice(from).filter((f) => f.dir === "server→client" && f.frame?.method === method);
  const exchanges = (from: number, method: string) => relay.exchanges().filter((e) => e.request.method === method && relay.frames.indexOf(relay.frames.find((f) => f.frame === e.request)!) >= from);
  const READY = /Ask Codex to do anything|›/;

  let threadId = "";

  it("starts, streams an answer, asks before a command, runs it after `y`, completes the turn", async () => {
    const from = relay.frames.length;
    startTui(["-s", "workspace-write"]);
    await waitForScreen(/Ask Codex to do anything/);

    mock.enqueue({ text: ["Hello ", "from ", "the ", "mock"] });
    await submit("say hello");
    await waitForScreen(/Hello from the mock/);
    await waitFor(() => serverFrames(from, "turn/completed").some((f) => f.frame.params.turn.items.some((i: any) => i.type === "agentMessage")), "turn/completed");
    const started = exchanges(from, "thread/start").find((e) => !e.response?.result?.thread?.ephemeral)!;
    threadId = started.response.result.thread.id;
    expect(started.request.params.sandbox).toBe("workspace-write");

    // A workdir outside the workspace and the temp roots is what on-request (the TUI's policy) asks about.
    const target = path.join(ws.dir, "tui-ran.txt");
    mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: `echo approved-by-y > ${target}`, workdir: "/" } }] }, { text: "the command is done" });
    const beforeCommand = relay.frames.length;
    await submit("run the command");
    await waitFor(() => serverFrames(beforeCommand, "item/commandExecution/requestApproval").length === 1, "the approval request");
    await waitForScreen(/Would you like to run the following command\?[\s\S]*Yes, proceed \(y\)/);
    expect(existsSync(target)).toBe(false);
    keys("y");
    await waitForScreen(/the command is done/);
    await waitFor(() => serverFrames(beforeCommand, "turn/completed").some((f) => f.frame.params.threadId === threadId), "turn/completed of the command turn");
    expect(readFileSync(target, "utf8")).toBe("approved-by-y\n");
    const answer = relay.frames.slice(beforeCommand).find((f) => f.dir === "client→server" && f.frame?.result?.decision !== undefined)!;
    expect(answer.frame.result.decision).toBe("accept");
    const done = serverFrames(beforeCommand, "item/completed").find((f) => f.frame.params.item.type === "commandExecution")!;
    expect(done.frame.params.item.status).toBe("completed");
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });

  it("codex resume --remote: picks the thread in the picker and continues it", async () => {
    expect(threadId).not.toBe("");
    const from = relay.frames.length;
    startTui(["resume"]);
    await waitForScreen(/say hello|Mock title/);
    keys("Enter");
    await waitFor(() => exchanges(from, "thread/resume").some((e) => e.response?.result), "thread/resume");
    const resumed = exchanges(from, "thread/resume").find((e) => e.response?.result)!;
    expect(resumed.request.params.threadId).toBe(threadId);
    await waitForScreen(/Ask Codex to do anything/);

    mock.enqueue({ text: "resumed answer" });
    const before = mock.requests.length;
    await submit("what did I say first");
    await waitForScreen(/resumed answer/);
    const turn = exchanges(from, "turn/start").find((e) => e.request.params.threadId === threadId);
    expect(turn).toBeDefined();
    expect(mock.requests.length).toBeGreaterThan(before);
    expect(JSON.stringify(mock.requests.at(-1)!.body)).toContain("say hello");
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });

  it("codex fork --remote --last: forks the latest thread into a new one", async () => {
    expect(threadId).not.toBe("");
    const from = relay.frames.length;
    startTui(["fork", "--last"]);
    await waitFor(() => exchanges(from, "thread/fork").some((e) => e.response?.result), "thread/fork");
    const fork = exchanges(from, "thread/fork").find((e) => e.response?.result)!;
    expect(fork.request.params.threadId).toBe(threadId);
    const forked = fork.response.result.thread;
    expect(forked.id).not.toBe(threadId);
    expect(forked.forkedFromId).toBe(threadId);
    await waitForScreen(/Ask Codex to do anything/);

    mock.enqueue({ text: "forked answer" });
    await submit("continue in the fork");
    await waitForScreen(/forked answer/);
    expect(exchanges(from, "turn/start").some((e) => e.request.params.threadId === forked.id)).toBe(true);
    expect(JSON.stringify(mock.requests.at(-1)!.body)).toContain("say hello");
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });
  it("`@` file mention (popup, Tab inserts the path) and a `!` shell command: shown on screen, conformant", async () => {
    writeFileSync(path.join(ws.dir, "mention-target.txt"), "the mentioned file\n");
    const from = relay.frames.length;
    startTui(["-s", "workspace-write"]);
    await waitForScreen(/Ask Codex to do anything/);

    // `@` + a partial name: the TUI lists files itself (codex-file-search, in-process) and asks
    // the server for matching threads (thread/search in Codex's form) — both shown in one popup.
    keys("-l", "@mention-tar");
    await waitForScreen(/mention-target\.txt/);
    await waitFor(() => exchanges(from, "thread/search").some((e) => e.request.params.searchTerm === "mention-tar" && e.response?.result), "thread/search for the mention");
    keys("Tab");
    await waitForScreen(/› mention-target\.txt/);
    mock.enqueue({ text: "mention answered" });
    await submit("what is in it");
    await waitForScreen(/mention answered/);
    const prompt = exchanges(from, "turn/start").find((e) => JSON.stringify(e.request.params.input).includes("what is in it"))!;
    expect(prompt.request.params.input[0].text).toBe("mention-target.txt what is in it");

    // `!cmd`: thread/shellCommand; the output appears as the user's own command.
    const beforeShell = relay.frames.length;
    keys("-l", "!echo bang-$((6*7))");
    await waitForScreen(/echo bang-\$\(\(6\*7\)\)/);
    keys("Enter");
    await waitForScreen(/You ran echo [^\n]*bang-[\s\S]*└ bang-42/);
    const shell = exchanges(beforeShell, "thread/shellCommand")[0]!;
    expect(shell.request.params.command).toBe("echo bang-$((6*7))");
    expect(shell.response.result).toEqual({});
    await waitFor(() => serverFrames(beforeShell, "turn/completed").length > 0, "turn/completed of the shell command");
    const ran = serverFrames(beforeShell, "item/completed").find((f) => f.frame.params.item.type === "commandExecution")!;
    expect(ran.frame.params.item).toMatchObject({ source: "userShell", status: "completed", exitCode: 0, aggregatedOutput: "bang-42\n", cwd: ws.dir });
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });
  it("/compact on a new thread, then /review of the uncommitted changes: shown as Codex shows them, conformant", async () => {
    const from = relay.frames.length;
    startTui(["-s", "workspace-write"]);
    await waitForScreen(/Ask Codex to do anything/);
    // The TUI starts its thread in the background: /compact before the answer reads "No active
    // thread is available" (seen under load).
    await waitFor(() => exchanges(from, "thread/start").some((e) => e.response?.result?.thread && !e.response.result.thread.ephemeral), "the TUI's thread/start answered");
    const requests = mock.requests.length;
    await submit("/compact");
    // /review only once the TUI has seen the compaction turn end ("Worked for …"): a slash
    // command typed while it still shows a task running may be refused.
    await waitForScreen(/Context compacted[\s\S]*Worked for/);
    expect(exchanges(from, "thread/compact/start")[0]!.response.result).toEqual({});
    expect(mock.requests.length).toBe(requests); // nothing to summarise: no model call
    mock.enqueue({ text: "[P2] mention-target.txt:1 is not covered by a test." });
    await submit("/review");
    await waitForScreen(/Review uncommitted changes/);
    keys("2");
    keys("Enter");
    await waitForScreen(/Code review started: current changes[\s\S]*not covered by a test[\s\S]*Code review finished/);
    const review = exchanges(from, "review/start")[0]!;
    expect(review.request.params.target).toEqual({ type: "uncommittedChanges" });
    expect(review.response.result.reviewThreadId).toBe(review.request.params.threadId);
    await waitFor(() => serverFrames(from, "turn/completed").some((f) => f.frame.params.turn.id === review.response.result.turn.id), "turn/completed of the review");
    const exited = serverFrames(from, "item/completed").find((f) => f.frame.params.item.type === "exitedReviewMode")!;
    expect(exited.frame.params.item.review).toBe("[P2] mention-target.txt:1 is not covered by a test.");
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });

  it("default mode, fresh project (read-only, on-request): asks before a write, `y` runs it once, Esc and `n` decline, `p` saves a rule that answers the next matching command", async () => {
    const from = relay.frames.length;
    startTui([]);
    await waitForScreen(/Ask Codex to do anything/);
    const decisions = (since: number) => relay.frames.slice(since).filter((f) => f.dir === "client→server" && f.frame?.result?.decision !== undefined).map((f) => f.frame.result.decision);
    const approvalsSince = (since: number) => serverFrames(since, "item/commandExecution/requestApproval").map((f) => f.frame.params);
    const escalate = (command: string, question: string) => ({ toolCalls: [{ name: "shell", arguments: { command, sandbox_permissions: "require_escalated", justification: question } }] });
    const inWs = (name: string) => existsSync(path.join(ws.dir, name));
    /**
     * The turn of `prompt` has ended as the TUI sees it: below the prompt it shows "Worked for …"
     * (or "Conversation interrupted" after a cancel), written only once it has processed the end —
     * so a prompt typed after it starts a turn, not a steer of the old one.
     */
    const idle = async (since: number, prompt: string) => {
      await waitFor(() => serverFrames(since, "turn/completed").length > 0, "turn/completed");
      const escaped = prompt.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      await waitForScreen(new RegExp(`› ${escaped}\\n[\\s\\S]*(Worked for|Conversation interrupted)`));
    };

    // The model first runs it plainly: the read-only sandbox denies it and the model is told (no
    // prompt); it then asks to escalate, with a question, and the user is asked once.
    mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "touch approved.txt" } }] }, escalate("touch approved.txt", "Do you want to create approved.txt?"), { text: "approved.txt is there" });
    let before = relay.frames.length;
    await submit("create approved.txt");
    await waitFor(() => approvalsSince(before).length === 1, "the approval request");
    const started = exchanges(from, "thread/start").find((e) => !e.response?.result?.thread?.ephemeral)!;
    expect(started.request.params).toMatchObject({ sandbox: "read-only", approvalPolicy: null });
    expect(started.response.result).toMatchObject({ approvalPolicy: "on-request", sandbox: { type: "readOnly" } });
    await waitForScreen(/Would you like to run the following command\?[\s\S]*Reason: Do you want to create approved\.txt\?[\s\S]*\$ touch approved\.txt[\s\S]*Yes, proceed \(y\)[\s\S]*don't ask again for commands that start with `touch approved\.txt` \(p\)/);
    expect(inWs("approved.txt")).toBe(false);
    const told = JSON.stringify(mock.requests.at(-1)!.body);
    expect(told).toContain("Read-only file system");
    keys("y");
    await waitForScreen(/approved\.txt is there/);
    await idle(before, "create approved.txt");
    expect(inWs("approved.txt")).toBe(true);
    expect(decisions(before)).toEqual(["accept"]);
    const ran = serverFrames(before, "item/completed").filter((f) => f.frame.params.item.type === "commandExecution").map((f) => f.frame.params.item.status);
    expect(ran).toEqual(["failed", "completed"]); // the denied plain run, then the one approved run

    // Esc and `n`: "No, and tell Codex what to do differently" — not run, the turn ends.
    for (const [key, name] of [["Escape", "declined-esc.txt"], ["n", "declined-n.txt"]] as const) {
      before = relay.frames.length;
      mock.enqueue(escalate(`touch ${name}`, `Do you want to create ${name}?`));
      await submit(`create ${name}`);
      await waitFor(() => approvalsSince(before).length === 1, `the approval request for ${name}`);
      await waitForScreen(new RegExp(`\\$ touch ${name.replace(".", "\\.")}`));
      keys(key);
      await idle(before, `create ${name}`);
      expect(serverFrames(before, "turn/completed")[0]!.frame.params.turn.status).toBe("interrupted");
      expect(decisions(before)).toEqual(["cancel"]);
      expect(inWs(name)).toBe(false);
    }

    // `p`: "Yes, and don't ask again for commands that start with `touch ruled.txt`".
    before = relay.frames.length;
    mock.enqueue(escalate("touch ruled.txt", "Do you want to create ruled.txt?"), { text: "ruled.txt made" });
    await submit("create ruled.txt");
    await waitFor(() => approvalsSince(before).length === 1, "the approval request for ruled.txt");
    await waitForScreen(/don't ask again for commands that start with `touch ruled\.txt` \(p\)/);
    keys("p");
    await waitForScreen(/ruled\.txt made/);
    await idle(before, "create ruled.txt");
    expect(decisions(before)).toEqual([{ acceptWithExecpolicyAmendment: { execpolicy_amendment: ["touch", "ruled.txt"] } }]);
    expect(inWs("ruled.txt")).toBe(true);
    // The next matching command runs without a prompt.
    before = relay.frames.length;
    mock.enqueue(escalate("touch ruled.txt also-ruled.txt", "Do you want to create also-ruled.txt?"), { text: "also done, unasked" });
    await submit("create also-ruled.txt");
    await waitForScreen(/also done, unasked/);
    await idle(before, "create also-ruled.txt");
    expect(approvalsSince(before)).toEqual([]);
    expect(inWs("also-ruled.txt")).toBe(true);
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });

  it("/status shows the context window; /fork keeps the thread's name in the footer", async () => {
    const from = relay.frames.length;
    startTui(["-s", "workspace-write"]);
    await waitForScreen(/Ask Codex to do anything/);
    mock.enqueue({ text: "status answer" });
    await submit("a turn for the token usage");
    await waitForScreen(/status answer[\s\S]*Worked for/);
    await waitFor(() => serverFrames(from, "turn/completed").length > 0, "turn/completed");
    expect(serverFrames(from, "thread/tokenUsage/updated")[0]!.frame.params.tokenUsage.modelContextWindow).toBe(272_000);
    await submit("/status");
    // /status prints its card into the transcript (nothing to dismiss).
    await waitForScreen(/Context window:?\s+\S/);
    const threadId = exchanges(from, "thread/start").find((e) => !e.response?.result?.thread?.ephemeral)!.response.result.thread.id;
    await waitFor(() => serverFrames(from, "thread/name/updated").some((f) => f.frame.params.threadId === threadId), "the thread's name");
    const name = serverFrames(from, "thread/name/updated").find((f) => f.frame.params.threadId === threadId)!.frame.params.threadName as string;
    await submit("/fork");
    await waitFor(() => exchanges(from, "thread/fork").some((e) => e.response?.result), "thread/fork");
    const fork = exchanges(from, "thread/fork").find((e) => e.response?.result)!.response.result.thread;
    expect(fork).toMatchObject({ forkedFromId: threadId, name });
    await waitFor(() => screen().split("\n").some((l) => l.includes("mock-model") && l.includes(name)), `the footer with the name "${name}"`);
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });
});

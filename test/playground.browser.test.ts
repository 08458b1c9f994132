// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * The web playground in a real browser: headless Chromium driven by playwright-core against a
 * server whose model is the mock. Opens the page served at GET /, starts a thread (approval policy
 * picked in the UI), watches a reply stream in, approves a shell command and a patch from the cards
 * inside their items, sees the output, forks at the first turn (the fork gets its own name),
 * reconnects mid-turn (resume after the last seq seen), stops a turn; renders Markdown safely;
 * lays out at 390 px. Screenshots go to test-output/playground*.png. The newer features (copy,
 * highlighting, rename/archive, themes, model picker, shortcuts, token field, folders, the
 * missing-key warning) are in playground-features.browser.test.ts.
 *
 * The browser (test/support/browser.ts): APP_SERVER_TEST_CHROMIUM if set, else the Chromium of the
 * npm package @sparticuz/chromium, else a chromium on PATH. When none can start, the file is
 * skipped with the reason printed — except with REQUIRE_BROWSER=1 (.ci/run), where that fails.
 */
import { mkdirSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeBrowser, launchBrowser } from "./support/browser.js";
import { BACKENDS } from "./support/db.js";
import { REPO_ROOT } from "./support/process.js";
import { TestClient } from "./support/client.js";
import { newPlaygroundPage } from "./support/playground.js";
import { startTurnHarness, turnCompleted, type TurnHarness } from "./support/turns.js";

const SCREENSHOT = path.join(REPO_ROOT, "test-output", "playground.png");
const SCREENSHOT_APPROVAL = path.join(REPO_ROOT, "test-output", "playground-approval.png");
const SCREENSHOT_MARKDOWN = path.join(REPO_ROOT, "test-output", "playground-markdown.png");
const SCREENSHOT_REVIEW = path.join(REPO_ROOT, "test-output", "playground-review.png");
const SCREENSHOT_NARROW = path.join(REPO_ROOT, "test-output", "playground-390.png");
const SCREENSHOT_NARROW_DRAWER = path.join(REPO_ROOT, "test-output", "playground-390-threads.png");
const backend = BACKENDS[BACKENDS.length - 1]!;

const launched = await launchBrowser();
if ("unavailable" in launched) {
  if (process.env.REQUIRE_BROWSER === "1") throw new Error(`REQUIRE_BROWSER=1 but no browser can start here: ${launched.unavailable}`);
  console.warn(`[skipped] test/playground.browser.test.ts: no browser can start here (${launched.unavailable})`);
}

describe.skipIf("unavailable" in launched)("web playground in headless Chromium", () => {
  let h: TurnHarness;
  let browser: Browser;
  let page: Page;
  let consoleErrors: string[];
  let consoleText: string[];
  /** The WebSocket URLs the page opened. */
  const socketUrls: string[] = [];

  beforeAll(async () => {
    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    browser = (launched as { browser: Browser }).browser;
    h = await startTurnHarness(backend, "openai-chat");
    ({ page, errors: consoleErrors, console: consoleText } = await newPlaygroundPage(browser, h.ts.httpUrl));
    page.on("websocket", (ws) => socketUrls.push(ws.url()));
  });

  afterAll(async () => {
    await closeBrowser(browser);
    await h?.close();
  }, 120_000);

  it("serves the page, the script and the styles with their content types", async () => {
    for (const [file, type] of [
      ["/", "text/html"],
      ["/app.js", "text/javascript"],
      ["/style.css", "text/css"],
      ["/modules/items.js", "text/javascript"],
      ["/modules/markdown.js", "text/javascript"],
      ["/vendor/markdown-it.mjs", "text/javascript"],
      ["/vendor/highlight.mjs", "text/javascript"],
    ] as const) {
      const res = await fetch(`${h.ts.httpUrl}${file}`);
      expect(res.status, file).toBe(200);
      expect(res.headers.get("content-type"), file).toContain(type);
      expect(res.headers.get("content-security-policy"), file).toContain("default-src 'none'");
    }
  });

  it("streams a reply, asks for a command inline, runs it once accepted; fork, reconnect + resume, interrupt", async () => {
    const token = "s3cret/token=+";
    // The token comes in the fragment (never sent to the server) and leaves the address bar.
    await page.goto(`${h.ts.httpUrl}/#token=${encodeURIComponent(token)}`);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    expect(new URL(page.url()).hash).toBe("");
    // A token is in use: its field is shown (to change it), filled in.
    expect(await page.isVisible("#connect-form")).toBe(true);
    expect(await page.inputValue("#token")).toBe(token);

    // A browser cannot set Authorization on a WebSocket: the token goes as ?token= (URL-encoded).
    expect(socketUrls).toEqual([`${h.ts.url}/?token=${encodeURIComponent(token)}`]);
    expect(new URL(socketUrls[0]!).searchParams.get("token")).toBe(token);

    // A new thread whose policy asks before commands, picked in the UI.
    await page.selectOption("#new-approval", "untrusted");
    await page.click("#new-thread");
    await page.locator("#thread-meta", { hasText: "approval: untrusted" }).waitFor();
    // Where the thread runs: the server's working directory (the thread's cwd), said in the header.
    expect(await page.textContent("#thread-cwd")).toBe(`runs in ${h.ts.home}`);
    // The id is shown short (its last 8 characters), the whole of it on hover.
    const threadId = (await page.getAttribute("#thread-id", "data-thread-id"))!;
    expect(threadId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await page.textContent("#thread-id")).toBe(`#${threadId.slice(-8)}`);
    expect(await page.getAttribute("#thread-id", "title")).toContain(threadId);
    expect(await page.locator(".thread-header").textContent()).not.toContain(threadId);
    await page.locator(`.thread-entry[data-thread-id="${threadId}"].current`).waitFor();

    // Turn 1: a reply that pauses mid-stream, so the first half is on screen before the rest exists.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    h.mock.enqueue({ text: ["Hello from ", "the mock model."], gate: { afterEvents: 2, wait: gate } });
    await page.fill("#input", "Say hello");
    await page.click("#send");
    const agentText = page.locator(".item-agentMessage .text").first();
    await page.locator(".item-agentMessage.streaming .text", { hasText: "Hello from" }).waitFor();
    expect((await agentText.textContent())!.trim()).toBe("Hello from");
    // While it runs, Stop takes Send's place; steering is offered beside it, labelled as such.
    await page.locator("#stop").waitFor();
    expect(await page.isHidden("#send")).toBe(true);
    expect(await page.textContent("#steer")).toBe("Add to turn");
    // Titled by its first message at once, not "(no messages yet)" until the turn completes.
    expect(await page.textContent("#thread-title")).toBe("Say hello");
    await page.locator(`.thread-entry[data-thread-id="${threadId}"] .thread-entry-title`, { hasText: "Say hello" }).waitFor();
    release();
    await page.locator('.turn[data-status="completed"] .item-agentMessage .text', { hasText: "Hello from the mock model." }).waitFor();
    expect(await page.locator(".item-userMessage .text").first().textContent()).toBe("Say hello");

    // Turn 2: the model runs a shell command; the page shows an approval card with four choices.
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "touch approved.txt && echo playground-ok" } }] }, { text: "The command printed playground-ok." });
    await page.fill("#input", "Run echo");
    await page.press("#input", "Enter");
    const card = page.locator(".approval-card");
    await card.waitFor();
    expect(await card.locator("button").allTextContents()).toEqual(["Accept", "Accept for session", "Decline", "Cancel turn"]);
    // The card sits inside the command's block, which says it waits (not "running"); the command
    // itself is shown once, in the block's head.
    const command = page.locator(".item-commandExecution");
    expect(await command.locator(".command").textContent()).toBe("touch approved.txt && echo playground-ok");
    expect(await command.locator(".approval-card").count()).toBe(1);
    expect(await card.locator("pre").count()).toBe(0);
    expect(await command.locator(".item-head .badge").textContent()).toBe("waiting for approval");
    await page.locator("#thread-status", { hasText: "waiting for approval" }).waitFor();
    await page.screenshot({ path: SCREENSHOT_APPROVAL });
    // Nothing ran yet.
    expect(await page.locator(".item-commandExecution .output").textContent()).toBe("");
    await card.locator('button[data-decision="accept"]').click();

    await command.locator(".output", { hasText: "playground-ok" }).waitFor();
    await command.locator(".badge", { hasText: "exit 0" }).waitFor();
    await page.locator(".item-agentMessage .text", { hasText: "The command printed playground-ok." }).waitFor();
    await page.locator('.turn[data-status="completed"]').nth(1).waitFor();
    await expect.poll(() => page.textContent("#thread-status")).toBe("idle");
    expect(await card.locator(".approval-status").textContent()).toBe("You chose: Accept.");
    // The answer reads before the output it led to.
    expect(await command.evaluate((el) => {
      const answer = el.querySelector(".approval-status")!;
      const output = el.querySelector(".output")!;
      return Boolean(answer.compareDocumentPosition(output) & Node.DOCUMENT_POSITION_FOLLOWING);
    })).toBe(true);
    expect(await page.isHidden("#stop")).toBe(true);
    expect(await page.textContent("#send")).toBe("Send");

    // The thread list finds the thread by its preview.
    await page.fill("#thread-search", "Say hel");
    await page.locator(`.thread-entry[data-thread-id="${threadId}"]`, { hasText: "Say hello" }).waitFor();

    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    console.log(`playground screenshots: ${SCREENSHOT} (and ${path.basename(SCREENSHOT_APPROVAL)}, the pending approval)`);

    // Fork at turn 1: a new thread with only that turn, opened and listed.
    await page.fill("#thread-search", "");
    await page.locator(".turn").first().locator("button", { hasText: "Fork from here" }).click();
    await page.locator("#thread-meta", { hasText: `forked from ${threadId.slice(-8)}` }).waitFor();
    expect(await page.locator(".turn").count()).toBe(1);
    expect((await page.locator(".item-agentMessage .text").textContent())!.trim()).toBe("Hello from the mock model.");
    // The fork has its own name, here and in the list.
    expect(await page.textContent("#thread-title")).toBe("Say hello (fork)");
    const forkId = (await page.getAttribute("#thread-id", "data-thread-id"))!;
    expect(forkId).not.toBe(threadId);
    await page.locator(`.thread-entry[data-thread-id="${forkId}"] .thread-entry-title`, { hasText: "Say hello (fork)" }).waitFor();
    expect(await page.locator(`.thread-entry[data-thread-id="${threadId}"] .thread-entry-title`).textContent()).toBe("Say hello");
    // Back to the original: resumed with both turns.
    await page.locator(`.thread-entry[data-thread-id="${threadId}"]`).click();
    await expect.poll(() => page.locator(".turn").count()).toBe(2);
    expect(await page.locator(".item-commandExecution .output").textContent()).toContain("playground-ok");


    // Reconnecting mid-turn resumes from the last event seen: the reply completes in place.
    let release2!: () => void;
    const gate2 = new Promise<void>((r) => (release2 = r));
    h.mock.enqueue({ text: ["Before the reconnect, ", "after it."], gate: { afterEvents: 2, wait: gate2 } });
    // (Markup in messages is shown as text, never parsed.)
    const markup = "Again <img src=x onerror=window.__xss=1>";
    await page.fill("#input", markup);
    await page.click("#send");
    const third = page.locator(".turn").nth(2);
    expect(await third.locator(".item-userMessage .text").textContent()).toBe(markup);
    expect(await page.locator(".conversation img, .thread-list img").count()).toBe(0);
    await third.locator(".item-agentMessage .text", { hasText: "Before the reconnect," }).waitFor();
    const sockets = socketUrls.length;
    await page.click("#connect");
    await expect.poll(() => socketUrls.length).toBe(sockets + 1);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    release2();
    await third.locator(".item-agentMessage .text", { hasText: "Before the reconnect, after it." }).waitFor();
    await page.locator('.turn[data-status="completed"]').nth(2).waitFor();
    expect(await third.locator(".item-agentMessage").count()).toBe(1);
    expect(await page.locator(".turn").count()).toBe(3);

    // Stop: a reply that never comes, stopped with the button where Send was.
    h.mock.enqueue({ kind: "hang" });
    await page.fill("#input", "Wait for ever");
    await page.click("#send");
    await page.locator("#stop").click();
    await page.locator('.turn[data-status="interrupted"]').waitFor();
    expect(await page.isHidden("#stop")).toBe(true);
    expect(await page.isVisible("#send")).toBe(true);

    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(consoleErrors).toEqual([]);
    expect(consoleText.join("\n")).not.toContain(token);
  });
  it("shows a user's own command (the TUI's !cmd) and a review (/review) as such, not as raw JSON", async () => {
    const client = await TestClient.initialized(h.ts.url);
    let threadId: string;
    try {
      threadId = (await client.request("thread/start", { sandbox: "workspace-write" })).thread.id;
      await client.request("thread/name/set", { threadId, name: "Commands and a review" });
      await client.request("thread/shellCommand", { threadId, command: "echo hi-from-user" });
      const shellTurn = await client.waitForNotification("turn/started", (p) => p.threadId === threadId);
      await turnCompleted(client, shellTurn.params.turn.id);
      h.mock.enqueue({ text: "No **issues** found." });
      const { turn } = await client.request("review/start", { threadId, target: { type: "custom", instructions: "Check the error handling." } });
      await turnCompleted(client, turn.id);
    } finally {
      await client.close();
    }
    await page.click("#refresh-threads");
    await page.locator(`.thread-entry[data-thread-id="${threadId}"]`).click();
    await page.locator("#thread-title", { hasText: "Commands and a review" }).waitFor();
    await expect.poll(() => page.locator(".turn").count()).toBe(2);
    const shell = page.locator(".turn").first().locator(".item-commandExecution");
    expect(await shell.locator(".prompt").textContent()).toBe("you ran $");
    expect(await shell.locator(".command").textContent()).toBe("echo hi-from-user");
    expect(await shell.locator(".output").textContent()).toContain("hi-from-user");
    const review = page.locator(".turn").nth(1);
    expect(await review.locator(".item-enteredReviewMode").textContent()).toBe("review started: Check the error handling.");
    expect(await review.locator(".item-agentMessage .text strong").textContent()).toBe("issues");
    expect(await review.locator(".item-exitedReviewMode").textContent()).toBe("review finished");
    expect(await review.locator("pre.output").count()).toBe(0); // no item fell back to raw JSON
    await page.screenshot({ path: SCREENSHOT_REVIEW });
  });

  it("renders agent Markdown safely (no raw HTML, no javascript: links, monospaced code); a model error is shown once", async () => {
    await page.selectOption("#new-approval", "never");
    await page.click("#new-thread");
    await page.locator("#thread-meta", { hasText: "approval: never" }).waitFor();
    const markdown = [
      "Edited **main.py** and `util.py`:",
      "",
      "- first item",
      "- second item",
      "",
      "```python",
      "print('hi')",
      "```",
      "",
      'Raw <img src=x onerror="window.__mdxss=1"> <script>window.__mdxss=2</script> [click](javascript:window.__mdxss=3) [docs](https://example.com/docs)',
    ].join("\n");
    h.mock.enqueue({ text: markdown.match(/[\s\S]{1,17}/g)! });
    await page.fill("#input", "Describe the change");
    await page.click("#send");
    const turn = page.locator(".turn").last();
    await page.locator('.turn[data-status="completed"] .item-agentMessage .text', { hasText: "second item" }).waitFor();
    const text = turn.locator(".item-agentMessage .text");
    await text.locator("pre code").waitFor();
    expect(await text.locator("strong").textContent()).toBe("main.py");
    expect(await text.locator("p code").first().textContent()).toBe("util.py");
    expect(await text.locator("li").allTextContents()).toEqual(["first item", "second item"]);
    expect(await text.locator("pre code").textContent()).toBe("print('hi')\n");
    const font = await text.locator("pre code").evaluate((el) => getComputedStyle(el).fontFamily);
    expect(font).toMatch(/mono/i);
    // Raw HTML is text; only the https link is a link.
    expect(await text.locator("img, script").count()).toBe(0);
    expect(await text.textContent()).toContain('<img src=x onerror="window.__mdxss=1">');
    expect(await text.locator("a").evaluateAll((as) => as.map((a) => [a.getAttribute("href"), a.getAttribute("rel")]))).toEqual([["https://example.com/docs", "noopener noreferrer"]]);
    expect(await page.evaluate(() => (window as unknown as { __mdxss?: number }).__mdxss)).toBeUndefined();
    await page.screenshot({ path: SCREENSHOT_MARKDOWN });

    // A model error ends the turn failed, and the message appears once.
    h.mock.enqueue({ kind: "error", status: 400, message: "The model refused this request (mock)." });
    await page.fill("#input", "Fail please");
    await page.click("#send");
    const failed = page.locator('.turn[data-status="failed"]');
    await failed.waitFor();
    await expect.poll(() => failed.locator(".notice.error:visible").count()).toBe(1);
    expect(await failed.textContent()).toContain("The model refused this request (mock).");
    expect((await failed.textContent())!.split("The model refused this request (mock).").length).toBe(2);
    expect(consoleErrors).toEqual([]);
  });

  it("asks before a patch inside its block, shows the diff once, applies it once accepted", async () => {
    // A workspace of its own: the server's home (a new thread's default folder here) is hidden from tools.
    await page.fill("#new-cwd", mkdtempSync(path.join(os.tmpdir(), "playground-ws-")));
    await page.selectOption("#new-approval", "untrusted");
    await page.click("#new-thread");
    await page.locator("#thread-meta", { hasText: "approval: untrusted" }).waitFor();
    h.mock.enqueue(
      { toolCalls: [{ name: "apply_patch", arguments: { patch: "*** Begin Patch\n*** Add File: notes-from-playground.md\n+hello from the patch\n*** End Patch\n" } }] },
      { text: "Added the notes." },
    );
    await page.fill("#input", "Write notes");
    await page.click("#send");
    const change = page.locator(".item-fileChange").last();
    const card = change.locator(".approval-card");
    await card.waitFor();
    expect(await change.locator(".item-head .badge").textContent()).toBe("waiting for approval");
    // The diff is the item's; the card does not repeat it.
    expect(await change.locator(".diff").count()).toBe(1);
    expect(await card.locator(".diff").count()).toBe(0);
    expect(await change.locator(".diff").textContent()).toContain("+hello from the patch");
    await card.locator('button[data-decision="accept"]').click();
    await change.locator(".item-head .badge", { hasText: "applied" }).waitFor();
    await page.locator(".item-agentMessage .text", { hasText: "Added the notes." }).waitFor();
    expect(await card.locator(".approval-status").textContent()).toBe("You chose: Accept.");
    expect(consoleErrors).toEqual([]);
  });

  it("fits a 390 px screen: the top bar on one line, the threads in a drawer, the conversation full width", async () => {
    const { page: narrow, close } = await newPlaygroundPage(browser, h.ts.httpUrl, { width: 390, height: 844 });
    try {
      await narrow.goto(`${h.ts.httpUrl}/#token=${encodeURIComponent("s3cret/token=+")}`);
      await narrow.locator('#conn-status[data-state="connected"]').waitFor();
      await narrow.locator(".thread-entry").first().waitFor({ state: "attached" });
      await narrow.locator(".thread-entry").first().evaluate((el) => (el as HTMLElement).click());
      await narrow.locator(".turn").first().waitFor();
      const sizes = await narrow.evaluate(() => {
        const box = (sel: string) => document.querySelector(sel)!.getBoundingClientRect();
        const topbar = document.querySelector(".topbar")!;
        return {
          pageWidth: document.documentElement.scrollWidth,
          topbarOverflow: topbar.scrollWidth - topbar.clientWidth,
          topbarHeight: box(".topbar").height,
          conversationWidth: box("#conversation").width,
          sidebarShown: getComputedStyle(document.querySelector("#sidebar")!).display !== "none",
          wide: [...document.querySelectorAll("body *")]
            .filter((el) => el.getBoundingClientRect().right > 391 && getComputedStyle(el).display !== "none")
            .map((el) => `${el.tagName.toLowerCase()}#${el.id}.${[...el.classList].join(".")} ${Math.round(el.getBoundingClientRect().right)}`)
            .slice(0, 12),
        };
      });
      expect(sizes.pageWidth, sizes.wide.join("\n")).toBeLessThanOrEqual(390);
      expect(sizes.topbarOverflow).toBeLessThanOrEqual(0);
      expect(sizes.topbarHeight).toBeLessThan(60);
      expect(sizes.sidebarShown).toBe(false);
      expect(sizes.conversationWidth).toBeGreaterThanOrEqual(380);
      // The token in use needs no room once connected (it shows again after a refusal).
      expect(await narrow.isHidden("#connect-form")).toBe(true);
      expect(await narrow.locator(".topbar h1").evaluate((el) => el.getBoundingClientRect().width)).toBeGreaterThan(60);
      await narrow.screenshot({ path: SCREENSHOT_NARROW });
      await narrow.click("#toggle-sidebar");
      await narrow.locator("#sidebar .thread-entry").first().waitFor();
      expect(await narrow.locator("#sidebar").evaluate((el) => el.getBoundingClientRect().width)).toBeLessThanOrEqual(390);
      await narrow.screenshot({ path: SCREENSHOT_NARROW_DRAWER });
    } finally {
      await close();
    }
  });
});

// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * The web playground in a real browser: headless Chromium driven by playwright-core against a
 * server whose model is the mock. Opens the page served at GET /, starts a thread (approval policy
 * picked in the UI), watches a reply stream in, approves a shell command from the inline card,
 * sees its output, forks at the first turn, reconnects mid-turn (resume after the last seq seen),
 * interrupts a turn; saves screenshots to test-output/playground.png (+ playground-approval.png).
 *
 * Chromium must be at /usr/bin/chromium (CI installs it); without it this test fails, it does not skip.
 */
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { REPO_ROOT } from "./support/process.js";
import { startTurnHarness, type TurnHarness } from "./support/turns.js";

const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOT = path.join(REPO_ROOT, "test-output", "playground.png");
const SCREENSHOT_APPROVAL = path.join(REPO_ROOT, "test-output", "playground-approval.png");
const backend = BACKENDS[BACKENDS.length - 1]!;

describe("web playground in headless Chromium", () => {
  let h: TurnHarness;
  let browser: Browser;
  let page: Page;
  const consoleErrors: string[] = [];
  const consoleText: string[] = [];
  /** The WebSocket URLs the page opened. */
  const socketUrls: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`${CHROMIUM} is missing: the playground test needs Debian's chromium (apt-get install -y chromium; .ci/run installs it)`);
    }
    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    h = await startTurnHarness(backend, "openai-chat");
    // playwright's launch() gives every browser a fresh temporary user data dir, and adds --headless.
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run", "--disable-component-update", "--disable-sync", "--disable-quic"],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    // Fail on a missing element well before the test's own timeout, with playwright's message.
    page.setDefaultTimeout(8_000);
    page.on("console", (m) => {
      consoleText.push(m.text());
      if (m.type() === "error") consoleErrors.push(m.text());
    });
    page.on("pageerror", (err) => consoleErrors.push(String(err)));
    page.on("websocket", (ws) => socketUrls.push(ws.url()));
  });

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it("serves the page, the script and the styles with their content types", async () => {
    for (const [file, type] of [
      ["/", "text/html"],
      ["/app.js", "text/javascript"],
      ["/style.css", "text/css"],
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
    expect(await page.inputValue("#token")).toBe(token);

    // A browser cannot set Authorization on a WebSocket: the token goes as ?token= (URL-encoded).
    expect(socketUrls).toEqual([`${h.ts.url}/?token=${encodeURIComponent(token)}`]);
    expect(new URL(socketUrls[0]!).searchParams.get("token")).toBe(token);

    // A new thread whose policy asks before commands, picked in the UI.
    await page.selectOption("#new-approval", "untrusted");
    await page.click("#new-thread");
    await page.locator("#thread-meta", { hasText: "approval: untrusted" }).waitFor();
    const threadId = (await page.textContent("#thread-meta"))!.match(/thread (\S+)/)![1]!;
    await page.locator(`.thread-entry[data-thread-id="${threadId}"].current`).waitFor();

    // Turn 1: a reply that pauses mid-stream, so the first half is on screen before the rest exists.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    h.mock.enqueue({ text: ["Hello from ", "the mock model."], gate: { afterEvents: 2, wait: gate } });
    await page.fill("#input", "Say hello");
    await page.click("#send");
    const agentText = page.locator(".item-agentMessage .text").first();
    await page.locator(".item-agentMessage.streaming .text", { hasText: "Hello from" }).waitFor();
    expect(await agentText.textContent()).toBe("Hello from ");
    await expect.poll(() => page.textContent("#send")).toBe("Steer");
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
    expect(await card.locator("pre").textContent()).toBe("$ touch approved.txt && echo playground-ok");
    await page.locator("#thread-status", { hasText: "waiting for approval" }).waitFor();
    await page.screenshot({ path: SCREENSHOT_APPROVAL });
    // Nothing ran yet.
    expect(await page.locator(".item-commandExecution .output").textContent()).toBe("");
    await card.locator('button[data-decision="accept"]').click();

    const command = page.locator(".item-commandExecution");
    await command.locator(".output", { hasText: "playground-ok" }).waitFor();
    await command.locator(".badge", { hasText: "exit 0" }).waitFor();
    await page.locator(".item-agentMessage .text", { hasText: "The command printed playground-ok." }).waitFor();
    await page.locator('.turn[data-status="completed"]').nth(1).waitFor();
    await expect.poll(() => page.textContent("#thread-status")).toBe("idle");
    expect(await card.locator(".approval-status").textContent()).toBe("You chose: Accept.");
    expect(await page.isHidden("#interrupt")).toBe(true);

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
    expect(await page.locator(".item-agentMessage .text").textContent()).toBe("Hello from the mock model.");
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

    // Interrupt: a reply that never comes, stopped from the header button.
    h.mock.enqueue({ kind: "hang" });
    await page.fill("#input", "Wait for ever");
    await page.click("#send");
    await page.locator("#interrupt").click();
    await page.locator('.turn[data-status="interrupted"]').waitFor();
    expect(await page.isHidden("#interrupt")).toBe(true);
    expect(await page.textContent("#send")).toBe("Send");

    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(consoleErrors).toEqual([]);
    expect(consoleText.join("\n")).not.toContain(token);
  });
});

/**
 * The playground's conveniences in a real browser (headless Chromium, playwright-core), each
 * driven by clicks and keys and checked by what it does: code blocks highlighted and copied,
 * threads renamed and archived, the theme (system, pinned, remembered), the model picker (the
 * next turn's request goes to that model), keyboard shortcuts and steering, the token field only
 * when the server needs one, the folder of a new thread, the missing-key warning (and none for a
 * keyless local server). Screenshots, light and dark, desktop and phone: test-output/playground-*.png.
 *
 * Three servers share one mock model: an open one with keys (the harness), one that needs a token
 * and whose default provider has no key, one whose provider is a keyless local server. (One file
 * over ~300 lines: a browser and three servers take longer to start than these tests to run.)
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
import { backgroundLuminance, newPlaygroundPage, type PlaygroundPage } from "./support/playground.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { startTurnHarness, type TurnHarness } from "./support/turns.js";

const OUT = path.join(REPO_ROOT, "test-output");
const shot = (name: string) => path.join(OUT, `playground-${name}.png`);
const backend = BACKENDS[BACKENDS.length - 1]!;
const TOKEN = "features-token/=+";
/** The model variables of this machine must not decide what the pages show. */
const MODEL_VARS = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"];

const launched = await launchBrowser();
if ("unavailable" in launched) {
  if (process.env.REQUIRE_BROWSER === "1") throw new Error(`REQUIRE_BROWSER=1 but no browser can start here: ${launched.unavailable}`);
  console.warn(`[skipped] test/playground-features.browser.test.ts: no browser can start here (${launched.unavailable})`);
}

/** Types a message and sends it with Enter; resolves when its turn has completed. */
async function sendAndWait(page: Page, text: string) {
  const done = await page.locator('.turn[data-status="completed"]').count();
  await page.fill("#input", text);
  await page.press("#input", "Enter");
  await expect.poll(() => page.locator('.turn[data-status="completed"]').count(), { timeout: 15_000 }).toBe(done + 1);
}

describe.skipIf("unavailable" in launched)("playground conveniences in headless Chromium", () => {
  let browser: Browser;
  let h: TurnHarness;
  let locked: TestServer;
  let keyless: TestServer;
  const saved: Record<string, string | undefined> = {};
  const pages: PlaygroundPage[] = [];
  const open = async (origin: string, opts: Parameters<typeof newPlaygroundPage>[2] = {}) => {
    const p = await newPlaygroundPage(browser, origin, opts);
    pages.push(p);
    return p;
  };

  beforeAll(async () => {
    mkdirSync(OUT, { recursive: true });
    browser = (launched as { browser: Browser }).browser;
    for (const v of MODEL_VARS) {
      saved[v] = process.env[v];
      delete process.env[v];
    }
    h = await startTurnHarness(backend, "openai-chat");
    [locked, keyless] = await Promise.all([
      startTestServer(backend, {
        authToken: TOKEN,
        modelProvider: "anthropic",
        model: "mock-model",
        providers: { anthropic: { baseURL: "https://anthropic.invalid" }, "openai-chat": { baseURL: h.mock.openaiBaseUrl, apiKey: "k" } },
      }),
      startTestServer(backend, { modelProvider: "openai-chat", model: "local-model", providers: { "openai-chat": { baseURL: h.mock.openaiBaseUrl } } }),
    ]);
  });

  afterAll(async () => {
    for (const p of pages) await p.close().catch(() => {});
    await closeBrowser(browser);
    await Promise.all([h?.close(), locked?.close(), keyless?.close()]);
    for (const v of MODEL_VARS) if (saved[v] !== undefined) process.env[v] = saved[v];
  }, 120_000);

  it("highlights code blocks and copies them (and a thread's full id) with one click, light and dark", async () => {
    const { page, errors } = await open(h.ts.httpUrl, { clipboard: true });
    await page.goto(`${h.ts.httpUrl}/`);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    const python = "def add(a, b):\n    # <b>not bold</b>\n    return a + b\n";
    h.mock.enqueue({ text: ["Two blocks:\n\n```python\n", python, "```\n\n```\nplain $ text\n```\n\nDone."] });
    await sendAndWait(page, "Show me code");
    const blocks = page.locator(".item-agentMessage .code-block");
    expect(await blocks.count()).toBe(2);
    expect(await blocks.locator(".code-lang").allTextContents()).toEqual(["python", "text"]);
    const code = blocks.first().locator("pre code");
    // Coloured by highlight.js, the text unchanged; markup in code stays text.
    expect(await code.locator(".hljs-keyword").allTextContents()).toEqual(expect.arrayContaining(["def", "return"]));
    expect(await code.textContent()).toBe(python);
    expect(await code.locator("b").count()).toBe(0);
    expect(await blocks.nth(1).locator("[class^=hljs-]").count()).toBe(0);
    const keywordLight = await code.locator(".hljs-keyword").first().evaluate((el) => getComputedStyle(el).color);
    expect(keywordLight).not.toBe(await code.evaluate((el) => getComputedStyle(el).color));

    const copy = blocks.first().locator(".copy-code");
    await copy.click();
    await expect.poll(() => copy.textContent()).toBe("Copied");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(python);
    await expect.poll(() => copy.textContent(), { timeout: 5_000 }).toBe("Copy");
    await blocks.nth(1).locator(".copy-code").click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe("plain $ text\n");

    // The short id copies the whole id.
    const threadId = (await page.getAttribute("#thread-id", "data-thread-id"))!;
    await page.click("#thread-id");
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(threadId);
    await page.screenshot({ path: shot("code") });

    await page.click("#theme-toggle"); // system (light here) → light
    await page.click("#theme-toggle"); // → dark
    expect(await backgroundLuminance(page)).toBeLessThan(0.2);
    expect(await code.locator(".hljs-keyword").first().evaluate((el) => getComputedStyle(el).color)).not.toBe(keywordLight);
    await page.screenshot({ path: shot("code-dark") });
    expect(errors).toEqual([]);
  });

  it("follows the system's theme until one is picked, and remembers the pick", async () => {
    const { page, errors } = await open(h.ts.httpUrl, { colorScheme: "dark" });
    await page.goto(`${h.ts.httpUrl}/`);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    expect(await page.getAttribute("#theme-toggle", "data-theme-choice")).toBe("system");
    expect(await backgroundLuminance(page)).toBeLessThan(0.2);
    h.mock.enqueue({
      text: "Changed **two** files:\n\n- `src/app.ts`: a guard\n- `test/app.test.ts`: its test\n\n```ts\nexport function guard(x: unknown): x is string {\n  return typeof x === \"string\"; // narrow\n}\n```\n",
    });
    await sendAndWait(page, "Summarise the change");
    await page.screenshot({ path: shot("dark") });

    await page.click("#theme-toggle"); // → light, although the system is dark
    expect(await backgroundLuminance(page)).toBeGreaterThan(0.8);
    await page.reload();
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    expect(await page.getAttribute("#theme-toggle", "data-theme-choice")).toBe("light");
    expect(await backgroundLuminance(page)).toBeGreaterThan(0.8);

    await page.click("#theme-toggle"); // → dark, although the system is now light
    await page.emulateMedia({ colorScheme: "light" });
    expect(await backgroundLuminance(page)).toBeLessThan(0.2);
    await page.click("#theme-toggle"); // → the system's again: light
    expect(await page.getAttribute("#theme-toggle", "data-theme-choice")).toBe("system");
    expect(await backgroundLuminance(page)).toBeGreaterThan(0.8);
    await page.emulateMedia({ colorScheme: "dark" });
    expect(await backgroundLuminance(page)).toBeLessThan(0.2);
    expect(await page.evaluate(() => localStorage.getItem("agent-app-server.theme"))).toBeNull();
    expect(errors).toEqual([]);
  });

  it("sends the next turns to the model picked beside Send", async () => {
    const { page, errors } = await open(h.ts.httpUrl);
    await page.goto(`${h.ts.httpUrl}/`);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    const options = await page.locator("#turn-model option").allTextContents();
    expect(options).toEqual(expect.arrayContaining(["claude-sonnet-5-5 (anthropic)", "gpt-5.4 (openai)", "mock-model (openai-chat)"]));
    expect(await page.locator("#turn-model option:checked").textContent()).toBe("mock-model (openai-chat)");

    h.mock.enqueue({ text: "from the default" }, { text: "from claude" }, { text: "claude again" });
    await sendAndWait(page, "First");
    expect(h.mock.requests.at(-1)).toMatchObject({ api: "openai-chat", body: { model: "mock-model" } });
    const threadId = (await page.getAttribute("#thread-id", "data-thread-id"))!;

    await page.selectOption("#turn-model", { label: "claude-sonnet-5-5 (anthropic)" });
    await sendAndWait(page, "Second");
    expect(h.mock.requests.at(-1)).toMatchObject({ api: "anthropic", body: { model: "claude-sonnet-5-5" } });
    expect(await page.textContent("#thread-meta")).toContain("claude-sonnet-5-5 (anthropic)");
    // The thread keeps it: the next turn, with nothing picked, goes there too.
    await sendAndWait(page, "Third");
    expect(h.mock.requests.at(-1)).toMatchObject({ api: "anthropic", body: { model: "claude-sonnet-5-5" } });

    // Opened again later, the picker shows the thread's model.
    await page.keyboard.press("Control+k");
    await page.locator(`.thread-entry[data-thread-id="${threadId}"]`).click();
    await page.locator(".turn").nth(2).waitFor();
    expect(await page.locator("#turn-model option:checked").textContent()).toBe("claude-sonnet-5-5 (anthropic)");
    expect(errors).toEqual([]);
  });

  it("keys: Ctrl+K opens a new thread, Shift+Enter adds a line, Enter sends or steers, ? shows help, Esc closes it and then stops", async () => {
    const { page, errors } = await open(h.ts.httpUrl);
    await page.goto(`${h.ts.httpUrl}/`);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    h.mock.enqueue({ text: "first" });
    await sendAndWait(page, "A thread to leave");
    const listed = await page.locator(".thread-entry").count();

    await page.keyboard.press("Control+k");
    await page.locator("#thread-title", { hasText: "New thread" }).waitFor();
    expect(await page.locator(".turn").count()).toBe(0);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("input");
    // Nothing is created until the first message.
    await page.click("#refresh-threads");
    await expect.poll(() => page.locator(".thread-entry").count()).toBe(listed);
    await page.click("#input");

    // A reply that waits at its first words, so that a message can be added while it runs.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    h.mock.enqueue({ text: ["Working on ", "it."], gate: { afterEvents: 2, wait: gate } }, { text: "Noted the addition." });
    await page.keyboard.type("line one");
    await page.keyboard.press("Shift+Enter");
    await page.keyboard.type("line two");
    expect(await page.inputValue("#input")).toBe("line one\nline two");
    await page.keyboard.press("Enter");
    await page.locator(".item-agentMessage.streaming .text", { hasText: "Working on" }).waitFor();
    expect(await page.locator(".item-userMessage .text").first().textContent()).toBe("line one\nline two");
    await expect.poll(() => page.locator(".thread-entry").count()).toBe(listed + 1);
    expect(await page.textContent("#composer-hint")).toContain("Esc stops");

    // Enter while it runs adds the message to the running turn (steering), not a new turn.
    await page.fill("#input", "Also mention the tests");
    await page.press("#input", "Enter");
    await expect.poll(() => page.inputValue("#input")).toBe("");
    release();
    await page.locator('.turn[data-status="completed"] .item-agentMessage .text', { hasText: "Noted the addition." }).waitFor();
    expect(await page.locator(".turn").count()).toBe(1);
    expect(await page.locator(".item-userMessage .text").allTextContents()).toEqual(["line one\nline two", "Also mention the tests"]);
    expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toContain("Also mention the tests");

    // ? (outside a text field) opens the help; Esc closes it and leaves a running turn alone.
    h.mock.enqueue({ kind: "hang" });
    await page.fill("#input", "Take your time");
    await page.press("#input", "Enter");
    await page.locator("#stop").waitFor();
    await page.locator("#conversation").click({ position: { x: 5, y: 5 } });
    await page.keyboard.press("?");
    await page.locator("#help").waitFor();
    expect(await page.locator("#help").textContent()).toContain("Ctrl");
    await page.screenshot({ path: shot("help") });
    await page.keyboard.press("Escape");
    await page.locator("#help").waitFor({ state: "hidden" });
    expect(await page.isVisible("#stop")).toBe(true);
    // The next Esc stops the turn.
    await page.keyboard.press("Escape");
    await page.locator('.turn[data-status="interrupted"]').waitFor();
    expect(await page.isVisible("#send")).toBe(true);
    expect(errors).toEqual([]);
  });

  it("renames a thread (Esc cancels), archives it with Undo, and unarchives it from the archived list", async () => {
    const { page, errors } = await open(h.ts.httpUrl);
    await page.goto(`${h.ts.httpUrl}/`);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    h.mock.enqueue({ text: "ok" });
    await sendAndWait(page, "Thread to rename");
    const threadId = (await page.getAttribute("#thread-id", "data-thread-id"))!;
    const entry = page.locator(`.thread-entry[data-thread-id="${threadId}"]`);
    await entry.waitFor();
    const client = await TestClient.initialized(h.ts.url);
    try {
      await page.click("#rename");
      expect(await page.inputValue("#rename-input")).toBe("Thread to rename");
      await page.fill("#rename-input", "Not this");
      await page.press("#rename-input", "Escape");
      expect(await page.textContent("#thread-title")).toBe("Thread to rename");
      expect(await page.isVisible("#send")).toBe(true);
      expect((await client.request("thread/read", { threadId })).thread.name).toBeNull();

      await page.click("#rename");
      await page.fill("#rename-input", "Renamed by hand");
      await page.press("#rename-input", "Enter");
      expect(await page.textContent("#thread-title")).toBe("Renamed by hand");
      await entry.locator(".thread-entry-title", { hasText: "Renamed by hand" }).waitFor();
      await expect.poll(async () => (await client.request("thread/read", { threadId })).thread.name).toBe("Renamed by hand");

      // Archive: gone from the list and the page, with Undo.
      await page.click("#archive");
      await page.locator("#thread-title", { hasText: "New thread" }).waitFor();
      await entry.waitFor({ state: "detached" });
      expect(await page.textContent("#banner-text")).toBe("Archived “Renamed by hand”.");
      expect((await client.request("thread/list", { archived: true })).data.map((t: any) => t.id)).toContain(threadId);
      await page.click("#banner-action");
      await page.locator("#thread-title", { hasText: "Renamed by hand" }).waitFor();
      await entry.waitFor();
      expect((await client.request("thread/list", { archived: true })).data.map((t: any) => t.id)).not.toContain(threadId);

      // Archived again, then found in the archived list and unarchived from there.
      await page.click("#archive");
      await entry.waitFor({ state: "detached" });
      await page.check("#show-archived");
      await entry.click();
      await page.locator("#archive", { hasText: "Unarchive" }).waitFor();
      expect(await page.textContent("#thread-meta")).toContain("archived");
      await page.click("#archive");
      await page.locator("#archive", { hasText: /^Archive$/ }).waitFor();
      await entry.waitFor({ state: "detached" }); // no longer among the archived
      await page.uncheck("#show-archived");
      await entry.waitFor();
      expect((await client.request("thread/list", { archived: true })).data.map((t: any) => t.id)).not.toContain(threadId);
    } finally {
      await client.close();
    }
    expect(errors).toEqual([]);
  });

  it("starts a new thread in a folder typed for it, and offers the folder again", async () => {
    const folder = path.join(h.ts.home, "project-a");
    mkdirSync(folder, { recursive: true });
    const { page, context, errors } = await open(h.ts.httpUrl);
    await page.goto(`${h.ts.httpUrl}/`);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    await page.fill("#new-cwd", folder);
    expect(await page.textContent("#conversation .draft-cwd")).toBe(`runs in ${folder}`);
    h.mock.enqueue({ text: "In project a." });
    await sendAndWait(page, "Where am I?");
    expect(await page.textContent("#thread-cwd")).toBe(`runs in ${folder}`);
    const threadId = (await page.getAttribute("#thread-id", "data-thread-id"))!;
    const client = await TestClient.initialized(h.ts.url);
    try {
      expect((await client.request("thread/read", { threadId })).thread.cwd).toBe(folder);
    } finally {
      await client.close();
    }
    // Offered to pick from next time (this browser remembers it), newest first.
    const again = await context.newPage();
    await again.goto(`${h.ts.httpUrl}/`);
    await again.locator('#conn-status[data-state="connected"]').waitFor();
    expect(await again.locator("#recent-cwds option").evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))).toEqual([folder]);
    await again.close();
    expect(errors).toEqual([]);
  });

  it("offers to save a rule for a command; the next command it covers runs without a card", async () => {
    // Outside the server's home, which tools may not touch.
    const folder = mkdtempSync(path.join(os.tmpdir(), "rules-project-"));
    const { page, errors } = await open(h.ts.httpUrl);
    await page.goto(`${h.ts.httpUrl}/`);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    await page.fill("#new-cwd", folder);
    await page.selectOption("#new-approval", "untrusted");
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "touch ruled.txt" } }] }, { text: "first done" });
    await page.fill("#input", "Touch it");
    await page.press("#input", "Enter");
    const card = page.locator(".approval-card");
    await card.waitFor();
    const rule = card.locator('button[data-decision="rule"]');
    expect(await rule.textContent()).toBe("Always allow “touch ruled.txt …”");
    await rule.click();
    await page.locator(".item-agentMessage .text", { hasText: "first done" }).waitFor();
    expect(await card.locator(".approval-status").textContent()).toBe("You chose: Always allow “touch ruled.txt …”.");
    // The saved rule answers the next matching command: it runs, and no card appears.
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "touch ruled.txt" } }] }, { text: "second done" });
    await sendAndWait(page, "Again");
    await page.locator(".item-agentMessage .text", { hasText: "second done" }).waitFor();
    expect(await page.locator(".approval-card").count()).toBe(1);
    expect(await page.locator('.item-commandExecution .badge', { hasText: "exit 0" }).count()).toBe(2);
    const client = await TestClient.initialized(h.ts.url);
    try {
      const rules = (await client.request("execpolicy/rule/list", {})) as { data: Array<{ pattern: string[] }> };
      expect(rules.data.map((r) => r.pattern)).toContainEqual(["touch", "ruled.txt"]);
    } finally {
      await client.close();
    }
    expect(errors).toEqual([]);
  });

  it("shows the token field only when the server needs one", async () => {
    // A server without a token: connected, no field.
    const open1 = await open(h.ts.httpUrl);
    await open1.page.goto(`${h.ts.httpUrl}/`);
    await open1.page.locator('#conn-status[data-state="connected"]').waitFor();
    expect(await open1.page.isHidden("#connect-form")).toBe(true);

    // One that needs a token: refused, the field appears (focused) and says so.
    const { page, errors, console: lines } = await open(locked.httpUrl);
    await page.goto(`${locked.httpUrl}/`);
    await page.locator("#connect-form").waitFor();
    expect(await page.textContent("#conn-status")).toBe("disconnected");
    expect(await page.textContent("#banner-text")).toContain("The server needs a token");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("token");
    await page.fill("#token", "wrong");
    await page.press("#token", "Enter");
    await page.locator("#banner-text", { hasText: "the token was not accepted" }).waitFor();
    await page.screenshot({ path: shot("token") });
    await page.fill("#token", TOKEN);
    await page.click("#connect");
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    expect(await page.isHidden("#banner")).toBe(true);
    expect(await page.isVisible("#connect-form")).toBe(true); // in use: it stays, to change it

    // This server's default provider has no key: said before the first turn, with the fix.
    const warning = page.locator("#key-warning");
    await warning.waitFor();
    expect(await warning.textContent()).toContain("No API key for provider anthropic — set ANTHROPIC_API_KEY (or ANTHROPIC_API_KEY_FILE");
    await page.screenshot({ path: shot("key-warning") });
    // A model of a provider that has a key: no warning; back: the warning again.
    await page.selectOption("#turn-model", { label: "gpt-5.4-mini (openai-chat)" });
    expect(await warning.isHidden()).toBe(true);
    await page.selectOption("#turn-model", { label: "mock-model (anthropic)" });
    expect(await warning.isVisible()).toBe(true);
    // The warned-of turn fails, naming the variable.
    await page.fill("#input", "hello");
    await page.press("#input", "Enter");
    await page.locator('.turn[data-status="failed"] .notice.error', { hasText: "ANTHROPIC_API_KEY" }).waitFor();
    expect(lines.join("\n")).not.toContain(TOKEN);
    expect(errors.filter((e) => !e.includes("WebSocket"))).toEqual([]);
  });

  it("does not warn about a keyless local server (its turns run) nor about a provider with a key", async () => {
    for (const [server, reply] of [
      [keyless, "local model here"],
      [h.ts, "keyed model here"],
    ] as const) {
      const { page, errors } = await open(server.httpUrl);
      await page.goto(`${server.httpUrl}/`);
      await page.locator('#conn-status[data-state="connected"]').waitFor();
      await expect.poll(() => page.locator("#turn-model option").count()).toBeGreaterThan(0);
      h.mock.enqueue({ text: reply });
      await sendAndWait(page, "hi");
      expect((await page.locator(".item-agentMessage .text").last().textContent())!.trim()).toBe(reply);
      expect(await page.isHidden("#key-warning")).toBe(true);
      expect(errors).toEqual([]);
    }
  });

  it("fits a 390 px screen in the dark too: Stop in reach while a turn runs, nothing wider than the screen", async () => {
    const { page, errors } = await open(h.ts.httpUrl, { width: 390, height: 844, colorScheme: "dark" });
    await page.goto(`${h.ts.httpUrl}/`);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    h.mock.enqueue({ text: "Here is `code`:\n\n```bash\necho hi | tr a-z A-Z\n```\n" }, { kind: "hang" });
    await sendAndWait(page, "Phone check");
    await page.fill("#input", "Keep going");
    await page.press("#input", "Enter");
    const stop = page.locator("#stop");
    await stop.waitFor();
    const box = (await stop.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(390);
    expect(box.y + box.height).toBeLessThanOrEqual(844);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    expect(await backgroundLuminance(page)).toBeLessThan(0.2);
    await page.screenshot({ path: shot("390-dark") });
    await stop.click();
    await page.locator('.turn[data-status="interrupted"]').waitFor();
    expect(errors).toEqual([]);
  });
});

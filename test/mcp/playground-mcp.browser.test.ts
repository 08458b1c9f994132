// @needs-os-sandbox: runs an MCP stdio server in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * MCP in the web playground, in headless Chromium: a call to an MCP tool without the read-only
 * hint under `untrusted` shows the approval (Codex's mcpServer/elicitation/request with its three
 * choices) as a card; "Approve Once" runs the tool once and its mcpToolCall item shows the result.
 * Skipped with the reason printed when no browser can start (mandatory with REQUIRE_BROWSER=1).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeBrowser, launchBrowser } from "../support/browser.js";
import { BACKENDS } from "../support/db.js";
import { REPO_ROOT } from "../support/process.js";
import { startTurnHarness, type TurnHarness } from "../support/turns.js";

const SCREENSHOT = path.join(REPO_ROOT, "test-output", "playground-mcp-approval.png");
const FIXTURE = path.join(REPO_ROOT, "test", "fixtures", "mcp-test-server.mjs");
const backend = BACKENDS[BACKENDS.length - 1]!;

const launched = await launchBrowser();
if ("unavailable" in launched) {
  if (process.env.REQUIRE_BROWSER === "1") throw new Error(`REQUIRE_BROWSER=1 but no browser can start here: ${launched.unavailable}`);
  console.warn(`[skipped] test/mcp/playground-mcp.browser.test.ts: no browser can start here (${launched.unavailable})`);
}

describe.skipIf("unavailable" in launched)("MCP in the playground", () => {
  let h: TurnHarness;
  let page: Page;
  let dir: string;
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    dir = mkdtempSync(path.join(os.tmpdir(), "aas-mcp-page-"));
    writeFileSync(path.join(dir, "mcp.json"), JSON.stringify({ mcpServers: { notes: { command: process.execPath, args: [FIXTURE], cwd: dir } } }));
    h = await startTurnHarness(backend, "openai-chat", { mcpConfig: path.join(dir, "mcp.json") });
    await h.ts.server.app.mcp.ready();
    page = await (launched as { browser: Browser }).browser.newPage({ viewport: { width: 1280, height: 860 } });
    page.setDefaultTimeout(8_000);
    page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
    page.on("pageerror", (err) => consoleErrors.push(String(err)));
  });

  afterAll(async () => {
    await closeBrowser((launched as { browser?: Browser }).browser);
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it("asks for an MCP tool call with a card; Approve Once runs it once and the item shows the result", async () => {
    await page.goto(h.ts.httpUrl);
    await page.locator('#conn-status[data-state="connected"]').waitFor();
    await page.selectOption("#new-approval", "untrusted");
    await page.click("#new-thread");
    await page.locator("#thread-meta", { hasText: "approval: untrusted" }).waitFor();
    h.mock.enqueue({ toolCalls: [{ name: "mcp__notes__write_note", arguments: { name: "from-page.txt", text: "hello" } }] }, { text: "Wrote the note." });
    await page.fill("#input", "Write a note");
    await page.click("#send");

    const card = page.locator(".approval-card");
    await card.waitFor();
    expect(await card.locator(".approval-title").textContent()).toBe("MCP server notes");
    expect(await card.locator("pre").textContent()).toContain('run its tool "write_note"');
    expect(await card.locator("button").allTextContents()).toEqual(["Approve Once", "Approve this Session", "Deny", "Cancel turn"]);
    await page.screenshot({ path: SCREENSHOT });
    expect(existsSync(path.join(dir, "from-page.txt"))).toBe(false); // nothing runs before the answer

    await card.locator("button", { hasText: "Approve Once" }).click();
    await page.locator(".item-agentMessage .text", { hasText: "Wrote the note." }).waitFor();
    expect(readFileSync(path.join(dir, "from-page.txt"), "utf8")).toBe("hello");
    expect(await card.locator(".approval-status").textContent()).toBe("You chose: Approve Once.");
    const tool = page.locator(".item-mcpToolCall").last();
    expect(await tool.locator("code").first().textContent()).toBe("notes.write_note");
    expect(await tool.textContent()).toContain("wrote from-page.txt");
    expect(consoleErrors).toEqual([]);
  });
});

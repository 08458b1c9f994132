/**
 * The playground on a server a team shares (issue 28, item 6), in headless Chromium: it asks for
 * the token once (from #token=… or the field), keeps it in this tab's session storage (a reload
 * signs in again without asking), and shows who is signed in (account/read's user); another
 * user's token signs in as that user. The token never reaches the address bar or the console.
 *
 * Skipped with the reason printed when no browser can start, except with REQUIRE_BROWSER=1.
 */
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeBrowser, launchBrowser } from "../support/browser.js";
import { BACKENDS } from "../support/db.js";
import { newPlaygroundPage } from "../support/playground.js";
import { startTeamServer, type TeamServer } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const launched = await launchBrowser();
if ("unavailable" in launched) {
  if (process.env.REQUIRE_BROWSER === "1") throw new Error(`REQUIRE_BROWSER=1 but no browser can start here: ${launched.unavailable}`);
  console.warn(`[skipped] test/teams/playground.browser.test.ts: no browser can start here (${launched.unavailable})`);
}

describe.skipIf("unavailable" in launched)("the playground signs a team member in", () => {
  let t: TeamServer;
  let browser: Browser;
  beforeAll(async () => {
    browser = (launched as { browser: Browser }).browser;
    t = await startTeamServer(backend);
  });
  afterAll(async () => {
    await closeBrowser(browser);
    await t?.close();
  });

  it("asks for the token once, keeps it for the tab, and shows who is signed in", async () => {
    const p = await newPlaygroundPage(browser, t.ts.httpUrl);
    try {
      const { page } = p;
      // No token: refused, the field is shown.
      await page.goto(t.ts.httpUrl);
      await page.locator("#connect-form").waitFor({ state: "visible" });
      expect(await page.locator("#signed-in").isHidden()).toBe(true);
      // alice's token typed once.
      await page.fill("#token", t.users.alice.token);
      await page.click("#connect");
      await expect.poll(() => page.locator("#conn-status").getAttribute("data-state")).toBe("connected");
      await expect.poll(() => page.locator("#signed-in").textContent()).toBe("alice");
      expect(await page.locator("#signed-in").getAttribute("title")).toContain(t.users.alice.root!);
      // A reload signs in again from this tab's session storage, without asking.
      await page.reload();
      await expect.poll(() => page.locator("#signed-in").textContent()).toBe("alice");
      expect(await page.evaluate(() => sessionStorage.getItem("agent-app-server.token"))).toBe(t.users.alice.token);
      expect(page.url()).not.toContain(t.users.alice.token);
      // Clicking the name asks for another token: carol, an admin.
      await page.click("#signed-in");
      await page.fill("#token", t.users.carol.token);
      await page.click("#connect");
      await expect.poll(() => page.locator("#signed-in").textContent()).toBe("carol (admin)");
      expect(p.console.join("\n")).not.toContain(t.users.alice.token);
      expect(p.console.join("\n")).not.toContain(t.users.carol.token);
      expect(p.errors.filter((e) => !/WebSocket|401|Failed to load resource/.test(e))).toEqual([]);
    } finally {
      await p.close();
    }
  });
});

/** Opening the web playground in a browser context of its own, for the browser tests. */
import type { Browser, BrowserContext, Page } from "playwright-core";

export interface PlaygroundPage {
  page: Page;
  context: BrowserContext;
  /** Console errors and uncaught page errors: a test ends by expecting none. */
  errors: string[];
  /** Every console line (to check that no secret is ever logged). */
  console: string[];
  close(): Promise<void>;
}

export interface OpenOptions {
  width?: number;
  height?: number;
  colorScheme?: "light" | "dark";
  /** Let the page read and write the clipboard (copy buttons). */
  clipboard?: boolean;
}

/**
 * A fresh context per page: its own localStorage and sessionStorage (theme, token, recent folders),
 * so tests do not see each other's choices. Not navigated yet: the caller goes to its URL.
 */
export async function newPlaygroundPage(browser: Browser, origin: string, opts: OpenOptions = {}): Promise<PlaygroundPage> {
  const context = await browser.newContext({ viewport: { width: opts.width ?? 1280, height: opts.height ?? 860 }, colorScheme: opts.colorScheme ?? "light" });
  if (opts.clipboard) await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin });
  const page = await context.newPage();
  // Fail on a missing element well before the test's own timeout, with playwright's message.
  page.setDefaultTimeout(8_000);
  const errors: string[] = [];
  const lines: string[] = [];
  page.on("console", (m) => {
    lines.push(m.text());
    if (m.type() === "error") errors.push(m.text());
    if (process.env.DEBUG_PAGE) console.log(`[page] ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (err) => errors.push(String(err)));
  return { page, context, errors, console: lines, close: () => context.close() };
}

/** The page's background luminance (0 black … 1 white): tells the dark theme from the light one. */
export async function backgroundLuminance(page: Page, selector = "body"): Promise<number> {
  const rgb = await page.locator(selector).first().evaluate((el) => getComputedStyle(el).backgroundColor);
  const [r, g, b] = rgb.match(/[\d.]+/g)!.slice(0, 3).map(Number) as [number, number, number];
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}

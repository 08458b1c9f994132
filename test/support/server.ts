/** Starts the real server in-process on ws://127.0.0.1:0 with a fresh database. */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { startServer, type RunningServer, type StartOptions } from "../../src/server.js";
import { DEFAULT_MAX_FRAME_BYTES } from "../../src/config.js";
import { freshDatabase, type Backend, type TestDatabase } from "./db.js";

export interface TestServer {
  server: RunningServer;
  url: string;
  /** http://127.0.0.1:PORT */
  httpUrl: string;
  home: string;
  close(): Promise<void>;
}

let quiet: string | undefined;
/**
 * An empty HOME for the commands the servers under test run (made once per test process), so that
 * the machine's own ~/.bashrc (read by `bash -lc`) cannot add output to them.
 */
export function quietHome(): string {
  if (quiet === undefined) {
    const dir = mkdtempSync(path.join(os.tmpdir(), "aas-cmd-home-"));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    quiet = dir;
  }
  return quiet;
}

/** Silent by default; set TEST_LOG=debug to see server logs. */
export const testLogger = () => pino({ level: process.env.TEST_LOG ?? "silent" });

/** Starts a server on a fresh database (both are disposed of by close()). */
export async function startTestServer(backend: Backend, overrides: Partial<StartOptions> = {}): Promise<TestServer> {
  const db = await freshDatabase(backend);
  try {
    const ts = await startServerOn(db, overrides);
    return {
      ...ts,
      close: async () => {
        await ts.close();
        await db.cleanup();
      },
    };
  } catch (err) {
    await db.cleanup();
    throw err;
  }
}

/**
 * Starts a server on an existing test database without taking ownership of it (close() leaves
 * the data in place), so a test can stop it and start another on the same home/schema.
 * `reopen`: the PGlite data directory already exists, so it is opened as is instead of being
 * loaded from the blank template.
 */
export async function startServerOn(db: TestDatabase, overrides: Partial<StartOptions> = {}, reopen = false): Promise<TestServer> {
  const { loadDataDir, ...rest } = db.options;
  const server = await startServer({
    listen: "ws://127.0.0.1:0",
    databaseUrl: db.options.databaseUrl,
    home: db.home,
    modelProvider: "openai",
    model: "test-model",
    maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
    log: testLogger(),
    cwd: db.home,
    commandEnvironment: { HOME: quietHome() },
    // Open loopback, as APP_SERVER_AUTH=none: tests connect without a token unless they give one
    // (authToken) or opt into the default admission (auth: "token").
    auth: "none",
    ...overrides,
    database: { ...rest, ...(reopen ? {} : { loadDataDir }), ...overrides.database },
  });
  return {
    server,
    url: server.url,
    httpUrl: server.url.replace(/^ws:/, "http:"),
    home: db.home,
    close: () => server.close(),
  };
}

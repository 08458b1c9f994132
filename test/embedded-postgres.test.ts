/**
 * The embedded database in its own thread (src/store/embedded-postgres.ts): reached on a Unix
 * socket only this user may use, queries that leave the server's event loop free, a thread that
 * dies and is started again with the data intact, and a clean close.
 */
import { lstat, readdir, readFile, readlink, stat } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, type Database } from "../src/store/database.js";
import { TestClient } from "./support/client.js";
import { eventually } from "./support/cluster.js";
import { freshDatabase, type TestDatabase } from "./support/db.js";
import { startTestServer } from "./support/server.js";

const opened: { db: Database; test: TestDatabase }[] = [];

async function open(opts: { dataDir?: (home: string) => string } = {}): Promise<{ db: Database; test: TestDatabase }> {
  const test = await freshDatabase("pglite");
  const dataDir = opts.dataDir ? opts.dataDir(test.home) : test.options.dataDir!;
  const db = await openDatabase({ ...test.options, dataDir });
  const entry = { db, test };
  opened.push(entry);
  return entry;
}

afterEach(async () => {
  for (const { db, test } of opened.splice(0)) {
    await db.close();
    await test.cleanup();
  }
});

/**
 * The TCP ports this process listens on: the LISTEN rows of /proc/net/tcp{,6} whose socket inode is
 * one of this process's open files (the tables are the whole machine's, where other tests run).
 */
async function listeningTcpPorts(): Promise<number[]> {
  const inodes = new Set<string>();
  for (const fd of await readdir("/proc/self/fd")) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => "");
    const m = /^socket:\[(\d+)\]$/.exec(target);
    if (m) inodes.add(m[1]!);
  }
  const ports: number[] = [];
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of (await readFile(table, "utf8").catch(() => "")).split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] === "0A" && inodes.has(cols[9]!)) ports.push(parseInt(cols[1]!.split(":").at(-1)!, 16));
    }
  }
  return ports;
}

describe("the embedded database's thread", () => {
  it("is reached on a Unix socket in the home's database directory, mode 0600, and opens no TCP port", async () => {
    const before = await listeningTcpPorts();
    const { db, test } = await open();
    const socket = db.embedded!.socketPath;
    expect(path.dirname(socket)).toBe(test.options.dataDir);
    const st = await lstat(socket);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect((await stat(test.options.dataDir!)).mode & 0o777).toBe(0o700);
    const [{ n }] = await db.sql<{ n: number }[]>`select count(*)::int as n from threads`;
    expect(n).toBe(0);
    // This process listens on no new TCP port (before: pglite-socket on a loopback port).
    const after = await listeningTcpPorts();
    expect(after.filter((p) => !before.includes(p))).toEqual([]);
    await db.close();
    // Closed: the socket file is gone.
    await expect(lstat(socket)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("runs queries off the server's thread: the event loop turns while a query takes a second", async () => {
    const { db } = await open();
    let turns = 0;
    let spinning = true;
    const spin = () => {
      turns++;
      if (spinning) setImmediate(spin);
    };
    setImmediate(spin);
    // PGlite executes synchronously in WebAssembly: in this thread the loop could not turn meanwhile.
    await db.sql`select pg_sleep(1)`;
    spinning = false;
    expect(turns).toBeGreaterThan(10);
  });

  it("a thread that dies is started again: queries work afterwards and the data is intact", async () => {
    const { db } = await open();
    await db.sql`create table kept (v text)`;
    await db.sql`insert into kept values ('before the crash')`;
    const first = db.embedded!.thread;
    await first.terminate(); // as abrupt as a WebAssembly trap: no shutdown, no checkpoint
    // postgres.js reconnects to the same socket once the database is back (within ~250 ms here).
    let rows: { v: string }[] | undefined;
    for (let attempt = 0; attempt < 200 && !rows; attempt++) {
      rows = await db.sql<{ v: string }[]>`select v from kept`.catch(async () => {
        await new Promise((r) => setTimeout(r, 100));
        return undefined;
      });
    }
    expect(rows?.map((r) => r.v)).toEqual(["before the crash"]);
    expect(db.embedded!.thread).not.toBe(first);
    await db.sql`insert into kept values ('after')`;
    expect((await db.sql`select v from kept`).length).toBe(2);
  });

  it("a home too deep for a socket path gets a private socket directory elsewhere, removed at close", async () => {
    const deep = (home: string) => path.join(home, "d".repeat(60), "e".repeat(60), "pglite");
    const { db, test } = await open({ dataDir: (home) => deep(home) });
    const socket = db.embedded!.socketPath;
    expect(socket.startsWith(test.home)).toBe(false);
    expect((await stat(path.dirname(socket))).mode & 0o777).toBe(0o700);
    expect((await db.sql<{ one: number }[]>`select 1 as one`)[0]!.one).toBe(1);
    await db.close();
    await expect(stat(path.dirname(socket))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("a dump comes back from the thread as an archive PGlite loads", async () => {
    const { db } = await open();
    await db.sql`create table dumped (v int)`;
    await db.sql`insert into dumped values (42)`;
    const dump = await db.dumpDataDir!();
    expect(dump.size).toBeGreaterThan(1024);
    const again = await freshDatabase("pglite");
    const copy = await openDatabase({ dataDir: again.options.dataDir, loadDataDir: dump });
    try {
      expect(await copy.sql`select v from dumped`).toEqual([{ v: 42 }]);
    } finally {
      await copy.close();
      await again.cleanup();
    }
  });

  it("a server whose embedded database died serves again once it is back, with what it stored, and counts it in /metrics", async () => {
    const ts = await startTestServer("pglite");
    try {
      const c = await TestClient.initialized(ts.url);
      const before = (await c.request("thread/start", {})).thread.id as string;
      await ts.server.db.embedded!.thread.terminate();
      // Requests in the gap fail like during a database outage; once it is back they succeed.
      const after = await eventually(async () => (await c.request("thread/start", {}).catch(() => null))?.thread.id as string | undefined, 400, 50, "thread/start after the revival");
      const listed = (await c.request("thread/list", {})).data.map((t: { id: string }) => t.id);
      expect(listed).toEqual(expect.arrayContaining([before, after]));
      const metrics = await (await fetch(`${ts.httpUrl}/metrics`)).text();
      expect(metrics).toMatch(/^app_server_embedded_database_failures_total 1$/m);
      await c.close();
    } finally {
      await ts.close();
    }
  });
});

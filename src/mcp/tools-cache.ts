/**
 * The last tool list each MCP server reported, kept in `<home>/mcp/tools.json` so that it outlives
 * this process: after a restart a server's tools are offered from the cache until it connects (and
 * if it never does), so the first turn's tool list — the start of the prompt prefix — equals the
 * last one's even when a server is slow or down. An entry counts only for the configuration it
 * was listed under (a fingerprint: a hash, so no `env` value or header is written here); a server
 * that connects replaces its entry with what it lists now.
 */
import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../log.js";
import type { McpServerConfig } from "./config.js";

interface Entry {
  fingerprint: string;
  tools: Tool[];
}

const FORMAT = 1;

/** Identifies a server's configuration without revealing it. */
export const configFingerprint = (c: McpServerConfig) => createHash("sha256").update(JSON.stringify(c)).digest("hex");

export class ToolsCache {
  private entries = new Map<string, Entry>();
  private writes: Promise<void> = Promise.resolve();

  constructor(
    private readonly file: string,
    private readonly log: Logger,
  ) {}

  /** Reads the file; a missing or unreadable one is an empty cache (logged when broken). */
  async load(): Promise<void> {
    let text: string;
    try {
      text = await fs.readFile(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") this.log.warn({ err, file: this.file }, "cannot read the MCP tools cache; starting without it");
      return;
    }
    try {
      const parsed = JSON.parse(text) as { format?: number; servers?: Record<string, Entry> };
      if (parsed.format !== FORMAT || typeof parsed.servers !== "object" || parsed.servers === null) throw new Error(`unknown format ${parsed.format}`);
      for (const [name, e] of Object.entries(parsed.servers))
        if (typeof e?.fingerprint === "string" && Array.isArray(e.tools)) this.entries.set(name, { fingerprint: e.fingerprint, tools: e.tools });
    } catch (err) {
      this.log.warn({ err, file: this.file }, "the MCP tools cache is not valid; starting without it");
    }
  }

  /** The tools last listed by `name` under this configuration, or null. */
  get(name: string, fingerprint: string): Tool[] | null {
    const e = this.entries.get(name);
    return e && e.fingerprint === fingerprint ? e.tools : null;
  }

  set(name: string, fingerprint: string, tools: Tool[]): void {
    this.entries.set(name, { fingerprint, tools });
    this.save();
  }

  /** Forgets the servers not in `keep` (removed from the configuration). */
  retain(keep: ReadonlySet<string>): void {
    let changed = false;
    for (const name of this.entries.keys()) if (!keep.has(name)) changed = this.entries.delete(name) || changed;
    if (changed) this.save();
  }

  /** Resolves when every write asked for so far is on disk (or failed, logged). */
  flushed(): Promise<void> {
    return this.writes;
  }

  private save(): void {
    const body = JSON.stringify({ format: FORMAT, servers: Object.fromEntries([...this.entries].sort(([a], [b]) => (a < b ? -1 : 1))) });
    // Writes go one after another, each whole (temporary file, then rename): never a torn file.
    this.writes = this.writes.then(async () => {
      const tmp = `${this.file}.${process.pid}.tmp`;
      try {
        await fs.mkdir(path.dirname(this.file), { recursive: true, mode: 0o700 });
        await fs.writeFile(tmp, body, { mode: 0o600 });
        await fs.rename(tmp, this.file);
      } catch (err) {
        this.log.warn({ err, file: this.file }, "cannot write the MCP tools cache");
        // Tidying up after the failure just logged; a temp file left behind is overwritten by the next write.
        await fs.rm(tmp, { force: true }).catch(() => {});
      }
    });
  }
}

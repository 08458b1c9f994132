/**
 * The ACP tests' harness: `app-server acp` as a real child process (the run's bundle of src/),
 * driven by the SDK's own client (`client()` … `connect(ndJsonStream(…))`), with every message in
 * both directions recorded — so each test can assert on arrival order, and every message the agent
 * sent is checked against the ACP JSON Schema the SDK ships (schema.ts).
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { Readable, Transform, Writable } from "node:stream";
import {
  client,
  ndJsonStream,
  type ClientConnection,
  type ContentBlock,
  type CreateElicitationRequest,
  type CreateElicitationResponse,
  type RequestPermissionRequest,
  type RequestPermissionResponse,
  type SessionNotification,
  type SessionUpdate,
} from "@agentclientprotocol/sdk/unstable";
import { cleanEnv, cliArgv, REPO_ROOT } from "../support/process.js";

/** One message on the wire, as parsed, with who sent it. */
export interface WireMessage {
  from: "agent" | "client";
  message: Record<string, any>;
}

/** Decides a permission request; gets the request's abort signal ($/cancel_request from the agent). */
export type PermissionHandler = (req: RequestPermissionRequest, signal: AbortSignal) => Promise<RequestPermissionResponse> | RequestPermissionResponse;

/** Splits a byte stream into JSON lines and records each, passing the bytes on unchanged. */
function recorder(from: WireMessage["from"], wire: WireMessage[]): Transform {
  let partial = "";
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      partial += chunk.toString("utf8");
      let nl: number;
      while ((nl = partial.indexOf("\n")) >= 0) {
        const line = partial.slice(0, nl).trim();
        partial = partial.slice(nl + 1);
        if (line) wire.push({ from, message: JSON.parse(line) });
      }
      done(null, chunk);
    },
  });
}

export class AcpAgentProcess {
  readonly wire: WireMessage[] = [];
  readonly stderr: string[] = [];
  readonly updates: SessionNotification[] = [];
  readonly permissionRequests: RequestPermissionRequest[] = [];
  readonly connection: ClientConnection;
  readonly exited: Promise<number | null>;
  readonly elicitations: CreateElicitationRequest[] = [];
  /** How elicitation/create is answered (when the test announced the capability). */
  onElicitation: (req: CreateElicitationRequest) => CreateElicitationResponse = () => ({ action: "decline" });
  /** How permission requests are answered (tests swap it). */
  onPermission: PermissionHandler = () => ({ outcome: { outcome: "cancelled" } });
  private waiters: Array<{ match: () => boolean; resolve: () => void }> = [];

  constructor(readonly child: ChildProcessWithoutNullStreams, capabilities: { terminalOutput?: boolean } = {}) {
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d: string) => this.stderr.push(d));
    child.stdin.on("error", () => {});
    this.exited = new Promise((resolve) => child.on("close", (code) => resolve(code)));
    const fromAgent = child.stdout.pipe(recorder("agent", this.wire));
    const toAgent = recorder("client", this.wire);
    toAgent.pipe(child.stdin);
    const app = client({ name: "acp-test" })
      .onNotification("session/update", ({ params }) => {
        this.updates.push(params);
        this.check();
      })
      .onRequest("session/request_permission", async ({ params, signal }) => {
        this.permissionRequests.push(params);
        this.check();
        return this.onPermission(params, signal);
      })
      .onRequest("elicitation/create", ({ params }) => {
        this.elicitations.push(params);
        return this.onElicitation(params);
      });
    this.connection = app.connect(ndJsonStream(Writable.toWeb(toAgent) as WritableStream<Uint8Array>, Readable.toWeb(fromAgent) as ReadableStream<Uint8Array>));
    void capabilities;
  }

  /**
   * Leaves permission requests unanswered until the agent withdraws them ($/cancel_request), then
   * answers `cancelled` as the spec asks; `withdrawn()` counts the ones withdrawn.
   */
  holdPermissions(): { withdrawn(): number } {
    let withdrawn = 0;
    this.onPermission = (_req, signal) =>
      new Promise((resolve) =>
        signal.addEventListener("abort", () => {
          withdrawn++;
          resolve({ outcome: { outcome: "cancelled" } });
        }),
      );
    return { withdrawn: () => withdrawn };
  }

  get agent() {
    return this.connection.agent;
  }

  /** initialize with a client's usual capabilities (no fs, no terminal; Zed's terminal_output when asked). */
  initialize(opts: { terminalOutput?: boolean; elicitation?: boolean } = {}) {
    return this.agent.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: {
        fs: { readTextFile: false, writeTextFile: false },
        terminal: false,
        ...(opts.terminalOutput ? { _meta: { terminal_output: true } } : {}),
        ...(opts.elicitation ? { elicitation: { form: {} } } : {}),
      },
      clientInfo: { name: "acp-test", version: "1.0.0" },
    });
  }

  private check(): void {
    for (const w of [...this.waiters]) {
      if (w.match()) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  }

  /** Resolves once `match` holds (checked on every update and permission request); bounded. */
  waitFor(what: string, match: () => boolean, timeoutMs = 20_000): Promise<void> {
    if (match()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; stderr:\n${this.stderr.join("")}`)), timeoutMs);
      this.waiters.push({
        match,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  /** The updates of one session, in arrival order. */
  updatesOf(sessionId: string): SessionUpdate[] {
    return this.updates.filter((n) => n.sessionId === sessionId).map((n) => n.update);
  }

  /** The agent's text chunks of a session, joined. */
  agentText(sessionId: string, from = 0): string {
    return this.updatesOf(sessionId)
      .slice(from)
      .filter((u) => u.sessionUpdate === "agent_message_chunk")
      .map((u) => ((u as { content: { text?: string } }).content.text ?? ""))
      .join("");
  }

  /** Every update about one tool call, in order. */
  toolCall(sessionId: string, toolCallId: string): SessionUpdate[] {
    return this.updatesOf(sessionId).filter((u) => (u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") && u.toolCallId === toolCallId);
  }

  async close(): Promise<void> {
    this.connection.close();
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 10_000);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Spawns `app-server acp ARGS` (env: the test's on top of a clean one). */
export function spawnAcp(args: string[], env: Record<string, string> = {}, cwd = REPO_ROOT): AcpAgentProcess {
  const child = spawn(process.execPath, [...cliArgv(), "acp", ...args], { cwd, env: cleanEnv(env), stdio: ["pipe", "pipe", "pipe"] });
  return new AcpAgentProcess(child);
}

export const textBlock = (text: string): ContentBlock => ({ type: "text", text });

/**
 * An MCP server of the older HTTP+SSE transport (GET /sse for the event stream, POST /messages),
 * in this process, with one read-only tool `echo`. It answers a Streamable HTTP POST to /sse with
 * 405, as such servers do, which is what sends a client to its SSE fallback.
 */
export async function startSseMcpServer(): Promise<{ url: string; close(): Promise<void> }> {
  const transports = new Map<string, SSEServerTransport>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (req.method === "GET" && url.pathname === "/sse") {
      const transport = new SSEServerTransport("/messages", res);
      transports.set(transport.sessionId, transport);
      const mcp = new Server({ name: "sse-test", version: "1.0.0" }, { capabilities: { tools: {} } });
      mcp.setRequestHandler(ListToolsRequestSchema, () => ({
        tools: [{ name: "echo", description: "Echoes its text.", inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] }, annotations: { readOnlyHint: true } }],
      }));
      mcp.setRequestHandler(CallToolRequestSchema, (r) => ({ content: [{ type: "text", text: `sse echo: ${String(r.params.arguments?.text)}` }] }));
      void mcp.connect(transport);
    } else if (req.method === "POST" && url.pathname === "/messages") {
      const transport = transports.get(url.searchParams.get("sessionId") ?? "");
      if (transport) void transport.handlePostMessage(req, res);
      else res.writeHead(404).end();
    } else res.writeHead(405).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/sse`,
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

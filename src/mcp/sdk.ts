/**
 * The MCP SDK, loaded on first use: a server without MCP servers configured never loads it, and
 * one with them loads it when the first MCP server starts, not before the server is ready
 * (issue 33 item 3: the SDK and its zod schemas are ~200 KiB of code to compile at start-up).
 * The types stay static (`import type` costs nothing at run time).
 */
export type McpSdk = {
  Client: typeof import("@modelcontextprotocol/sdk/client/index.js").Client;
  StdioClientTransport: typeof import("@modelcontextprotocol/sdk/client/stdio.js").StdioClientTransport;
  StreamableHTTPClientTransport: typeof import("@modelcontextprotocol/sdk/client/streamableHttp.js").StreamableHTTPClientTransport;
  SSEClientTransport: typeof import("@modelcontextprotocol/sdk/client/sse.js").SSEClientTransport;
  types: typeof import("@modelcontextprotocol/sdk/types.js");
};

let loading: Promise<McpSdk> | null = null;

/** The SDK's modules, imported once; a failure says that it was the MCP SDK that did not load. */
export function loadMcpSdk(): Promise<McpSdk> {
  loading ??= (async () => {
    try {
      const [client, stdio, streamableHttp, sse, types] = await Promise.all([
        import("@modelcontextprotocol/sdk/client/index.js"),
        import("@modelcontextprotocol/sdk/client/stdio.js"),
        import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
        import("@modelcontextprotocol/sdk/client/sse.js"),
        import("@modelcontextprotocol/sdk/types.js"),
      ]);
      return {
        Client: client.Client,
        StdioClientTransport: stdio.StdioClientTransport,
        StreamableHTTPClientTransport: streamableHttp.StreamableHTTPClientTransport,
        SSEClientTransport: sse.SSEClientTransport,
        types,
      };
    } catch (err) {
      loading = null; // a later start tries again (e.g. after the installation was repaired)
      throw new Error(`could not load the MCP SDK (@modelcontextprotocol/sdk): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  })();
  return loading;
}

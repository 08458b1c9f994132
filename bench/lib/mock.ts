/**
 * The test suite's mock model server (test/support/mock-model-server.ts: the real OpenAI
 * Responses SSE format, on 127.0.0.1), run inside the bench process, plus the bookkeeping the
 * latency numbers need: for every model request, when its first and last SSE frame went out and
 * when each text chunk was written (process.hrtime.bigint(), taken by the mock right after the
 * write), keyed by a marker that the bench puts into the turn's user message.
 */
import { startMockModelServer, type MockModelServer, type MockReply } from "../../test/support/mock-model-server.js";

export type { MockModelServer, MockReply };

/** Goes into a turn's user message; the last one in a request body names the turn. */
export const MARK = "bench-mark-";
const MARK_RE = /bench-mark-([A-Za-z0-9_]+)/g;

export interface RequestTrace {
  marker: string;
  requestSeq: number;
  firstNs: bigint;
  lastNs: bigint;
  /** text chunk → hrtime it was written (chunks are unique within a reply). */
  chunks: Map<string, bigint>;
}

export class BenchMock {
  private readonly byMarker = new Map<string, RequestTrace>();
  private readonly bySeq = new Map<number, RequestTrace>();

  private constructor(
    readonly mock: MockModelServer,
    trace: boolean,
  ) {
    if (!trace) return;
    mock.onChunk = (info) => {
      let t = this.bySeq.get(info.requestSeq);
      if (!t) {
        const body = mock.requests[info.requestSeq - 1]?.rawBody ?? "";
        let marker = "";
        for (const m of body.matchAll(MARK_RE)) marker = m[1]!;
        t = { marker, requestSeq: info.requestSeq, firstNs: info.sentAtNs, lastNs: info.sentAtNs, chunks: new Map() };
        this.bySeq.set(info.requestSeq, t);
        if (marker) this.byMarker.set(marker, t);
      }
      t.lastNs = info.sentAtNs;
      if (info.textDelta !== undefined) t.chunks.set(info.textDelta, info.sentAtNs);
    };
  }

  /**
   * `defaultReply`: what a request gets when nothing is queued (default an instant "OK").
   * `trace: false`: no per-chunk bookkeeping (for bulk streams nobody measures).
   */
  static async start(defaultReply: MockReply = { text: "OK" }, trace = true): Promise<BenchMock> {
    return new BenchMock(await startMockModelServer({ defaultReply }), trace);
  }

  get openaiBaseUrl(): string {
    return this.mock.openaiBaseUrl;
  }

  /** Environment that points the server's `openai` provider (Responses API) at this mock. */
  serverEnv(): Record<string, string> {
    return {
      OPENAI_BASE_URL: this.mock.openaiBaseUrl,
      OPENAI_API_KEY: "bench-not-a-key",
      APP_SERVER_MODEL_PROVIDER: "openai",
      APP_SERVER_MODEL: "mock-model",
    };
  }

  /** Environment that points the server's `anthropic` provider (Messages API) at this mock. */
  anthropicEnv(): Record<string, string> {
    return { ANTHROPIC_BASE_URL: this.mock.anthropicBaseUrl, ANTHROPIC_API_KEY: "bench-not-a-key" };
  }

  enqueue(...steps: MockReply[]): void {
    this.mock.enqueue(...steps);
  }

  trace(marker: string): RequestTrace | undefined {
    return this.byMarker.get(marker);
  }

  get requestCount(): number {
    return this.mock.requests.length;
  }

  /** Forgets requests, traces and queued steps (request numbering restarts at 1). */
  reset(): void {
    this.mock.reset();
    this.byMarker.clear();
    this.bySeq.clear();
  }

  close(): Promise<void> {
    return this.mock.close();
  }
}

/** `n` unique text chunks of about `bytes` bytes each ("t17_xxxx… "). */
export function textChunks(n: number, bytes = 6): string[] {
  return Array.from({ length: n }, (_, k) => {
    const head = `t${k}_`;
    return head + "x".repeat(Math.max(0, bytes - head.length - 1)) + " ";
  });
}

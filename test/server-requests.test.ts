import { describe, expect, it } from "vitest";
import type { ClientReply } from "../src/protocol/jsonrpc.js";
import { ServerRequestBroker, type RequestingSubscriber } from "../src/runtime/server-requests.js";

/** A connection whose replies the test controls. */
function client() {
  const asked: Array<{ id: number; answer(r: ClientReply): void; drop(): void }> = [];
  let next = 1;
  const sub: RequestingSubscriber = {
    request: () => {
      let answer!: (r: ClientReply) => void;
      let drop!: () => void;
      const reply = new Promise<ClientReply>((res, rej) => {
        answer = res;
        drop = () => rej(new Error("connection closed"));
      });
      const id = next++;
      asked.push({ id, answer, drop });
      return { id, reply };
    },
  };
  return { sub, asked };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("ServerRequestBroker", () => {
  it("takes the first valid answer even when another client answered first with an error", async () => {
    const resolved: number[] = [];
    const broker = new ServerRequestBroker((_to, id) => resolved.push(id));
    const a = client();
    const b = client();
    const result = broker.ask("x", {}, [a.sub, b.sub], new AbortController().signal);
    a.asked[0]!.answer({ error: { code: -32601, message: "no approvals here" } });
    await tick();
    b.asked[0]!.answer({ result: { decision: "accept" } });
    expect(await result).toEqual({ result: { decision: "accept" } });
    expect(resolved.sort()).toEqual([1, 1]); // both copies announced resolved
  });

  it("falls back to the error reply when no other client can answer", async () => {
    const broker = new ServerRequestBroker(() => {});
    const a = client();
    const b = client();
    const result = broker.ask("x", {}, [a.sub, b.sub], new AbortController().signal);
    a.asked[0]!.answer({ error: { code: -32000, message: "nope" } });
    await tick();
    b.asked[0]!.drop();
    expect(await result).toEqual({ error: { code: -32000, message: "nope" } });
  });

  it("keeps a request pending when its only client disconnects, and re-sends it to a new subscriber", async () => {
    const broker = new ServerRequestBroker(() => {});
    const a = client();
    const result = broker.ask("x", { q: 1 }, [a.sub], new AbortController().signal);
    a.asked[0]!.drop();
    await tick();
    expect(broker.size).toBe(1);
    const b = client();
    broker.subscribed(b.sub);
    expect(b.asked).toHaveLength(1);
    b.asked[0]!.answer({ result: { ok: true } });
    expect(await result).toEqual({ result: { ok: true } });
    expect(broker.size).toBe(0);
  });

  it("resolves null when the turn is interrupted", async () => {
    const broker = new ServerRequestBroker(() => {});
    const abort = new AbortController();
    const result = broker.ask("x", {}, [client().sub], abort.signal);
    abort.abort();
    expect(await result).toBeNull();
  });
});

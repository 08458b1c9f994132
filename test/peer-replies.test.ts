/**
 * Clients' replies to the server's own requests (src/rpc/peer.ts, clientReply): what request()
 * and requestWithId() make of well-formed replies, of an `error` that is not a JSON-RPC error
 * object, and of the corner cases JSON-RPC 2.0 §5 leaves to the receiver.
 */
import { describe, expect, it } from "vitest";
import { RpcError } from "../src/rpc/errors.js";
import { RpcPeer } from "../src/rpc/peer.js";

const quiet = { warn: () => {}, error: () => {}, debug: () => {} };
const settle = () => new Promise<void>((r) => setImmediate(r));

function harness() {
  const sent: string[] = [];
  const peer = new RpcPeer((text) => sent.push(text), quiet);
  /** The id of the last request the server sent. */
  const lastId = (): number => JSON.parse(sent.at(-1)!).id;
  const reply = async (msg: object) => {
    peer.receive(JSON.stringify(msg));
    await settle();
  };
  return { peer, sent, lastId, reply };
}

describe("RpcPeer: replies to the server's requests", () => {
  it("requestWithId: a result, and an error object passed on as sent (extra members included)", async () => {
    const h = harness();
    const a = h.peer.requestWithId("ask", { n: 1 });
    await h.reply({ id: a.id, result: { decision: "accept" } });
    await expect(a.reply).resolves.toEqual({ result: { decision: "accept" } });

    const b = h.peer.requestWithId("ask", { n: 2 });
    await h.reply({ jsonrpc: "2.0", id: b.id, error: { code: -32000, message: "no", data: [1], extra: true } });
    await expect(b.reply).resolves.toEqual({ error: { code: -32000, message: "no", data: [1], extra: true } });
    expect(h.sent).toHaveLength(2); // the two requests; replies are never answered
  });

  it("an error that is not a JSON-RPC error object becomes -32603 carrying it as data", async () => {
    const h = harness();
    for (const bad of ["oops", 7, true, [1], { code: "x", message: "m" }, { code: 1 }, { message: "m" }]) {
      const r = h.peer.requestWithId("ask", {});
      await h.reply({ id: r.id, error: bad });
      await expect(r.reply).resolves.toEqual({ error: { code: -32603, message: "Malformed error in the client's reply", data: bad } });

      const asked = h.peer.request("ask", {}).then(
        () => null,
        (e: unknown) => e,
      );
      await settle();
      await h.reply({ id: h.lastId(), error: bad });
      const err = await asked;
      expect(err).toBeInstanceOf(RpcError);
      expect(err).toMatchObject({ code: -32603, message: "Malformed error in the client's reply", data: bad });
    }
  });

  it("a null error is no error; a reply with both a result and an error is an error reply", async () => {
    const h = harness();
    const ok = h.peer.request("ask", {});
    await settle();
    await h.reply({ id: h.lastId(), result: 5, error: null });
    await expect(ok).resolves.toBe(5);

    const both = h.peer.requestWithId("ask", {});
    await h.reply({ id: both.id, result: 5, error: { code: 1, message: "m" } });
    await expect(both.reply).resolves.toEqual({ error: { code: 1, message: "m" } });

    const bothAsked = h.peer.request("ask", {}).then(
      () => null,
      (e: unknown) => e,
    );
    await settle();
    await h.reply({ id: h.lastId(), result: 5, error: { code: 1, message: "m" } });
    expect(await bothAsked).toMatchObject({ code: 1, message: "m" });
  });
});

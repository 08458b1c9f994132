/** The admission helpers (src/transport/auth.ts): the peer's uid from /proc/net/tcp{,6}, the playground address. */
import net from "node:net";
import { describe, expect, it } from "vitest";
import { listeningBanner } from "../src/playground-address.js";
import { isLoopbackAddress, peerUid, peerUidSupported } from "../src/transport/auth.js";

describe.skipIf(process.platform !== "linux")("peerUid", () => {
  it("finds the uid of the other end of a loopback connection, IPv4 and IPv6", async () => {
    expect(await peerUidSupported()).toBe(true);
    for (const host of ["127.0.0.1", "::1"]) {
      const server = net.createServer();
      await new Promise<void>((r) => server.listen(0, host, r));
      const accepted = new Promise<net.Socket>((r) => server.once("connection", r));
      const client = net.connect((server.address() as net.AddressInfo).port, host);
      const sock = await accepted;
      expect(await peerUid(sock)).toBe(process.getuid!());
      client.destroy();
      sock.destroy();
      await new Promise((r) => server.close(r));
    }
  });

  it("nobody owns an address nothing is connected from", async () => {
    expect(await peerUid({ remoteAddress: "127.0.0.1", remotePort: 1, localAddress: "127.0.0.1", localPort: 2 })).toBeNull();
    expect(isLoopbackAddress("::ffff:127.0.0.1")).toBe(true);
    expect(isLoopbackAddress("10.0.0.1")).toBe(false);
  });

  it("the playground address carries the token in the fragment, and only on a terminal", () => {
    const url = "ws://127.0.0.1:4500";
    expect(listeningBanner(url, { token: "a/b+c", tokenFile: "/h/auth-token", terminal: true })).toBe(
      "app-server is listening on ws://127.0.0.1:4500; the playground: http://127.0.0.1:4500/#token=a%2Fb%2Bc\n",
    );
    // Elsewhere (a log file, docker logs) the line names where the token is, never the token.
    const logged = listeningBanner(url, { token: "a/b+c", tokenFile: "/h/auth-token", terminal: false })!;
    expect(logged).toBe("app-server is listening on ws://127.0.0.1:4500; the playground: http://127.0.0.1:4500/ (it asks for the token: /h/auth-token)\n");
    expect(listeningBanner(url, { token: null, tokenFile: null, terminal: true })).toBe("app-server is listening on ws://127.0.0.1:4500; the playground: http://127.0.0.1:4500/\n");
    expect(listeningBanner("ws://0.0.0.0:4500", { token: null, tokenFile: null, terminal: false })).toContain("the playground: http://127.0.0.1:4500/");
    expect(listeningBanner("stdio://")).toBeNull();
  });
});

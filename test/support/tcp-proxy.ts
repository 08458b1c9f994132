/**
 * A TCP proxy on loopback in front of one server (the test's Postgres), for faults of one
 * process's database link: `cut()` drops every connection and refuses new ones at once (a cable
 * pulled, a firewall), `restore()` lets them through again. Other processes, connected directly,
 * keep their database. `loseCommitAcknowledgement(marker)`: the next transaction whose statements
 * mention `marker` commits in Postgres, but the connection drops before the client hears so (the
 * client cannot tell whether it committed).
 */
import net from "node:net";

/** A CommandComplete message's tag for COMMIT, as Postgres sends it. */
const COMMIT_COMPLETE = Buffer.from("COMMIT\0");

export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private cutOff = false;
  private commitLoss: { marker: Buffer; done: () => void } | null = null;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    const server = net.createServer((client) => {
      if (proxy!.cutOff) return void client.destroy();
      const upstream = net.connect(target.port, target.host);
      for (const s of [client, upstream]) {
        proxy!.sockets.add(s);
        s.on("close", () => proxy!.sockets.delete(s));
        s.on("error", () => {});
      }
      // The client's statements since its last commit mention the armed marker.
      let marked = false;
      client.on("data", (chunk: Buffer) => {
        const loss = proxy!.commitLoss;
        if (loss && chunk.includes(loss.marker)) marked = true;
        upstream.write(chunk);
      });
      upstream.on("data", (chunk: Buffer) => {
        const loss = proxy!.commitLoss;
        // The CommandComplete of COMMIT: Postgres sends it once the transaction is durable.
        if (marked && loss && chunk.includes(COMMIT_COMPLETE)) {
          proxy!.commitLoss = null;
          client.destroy();
          upstream.destroy();
          return loss.done();
        }
        if (marked && chunk.includes(COMMIT_COMPLETE)) marked = false;
        client.write(chunk);
      });
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    proxy = new TcpProxy(server, (server.address() as net.AddressInfo).port);
    return proxy;
  }

  /** `url` (a postgres:// URL) pointed at this proxy. */
  urlFor(url: string): string {
    const u = new URL(url);
    u.hostname = "127.0.0.1";
    u.port = String(this.port);
    return u.toString();
  }

  /** Resolves once a commit of a transaction mentioning `marker` went through unacknowledged. */
  loseCommitAcknowledgement(marker: string): Promise<void> {
    return new Promise((done) => (this.commitLoss = { marker: Buffer.from(marker), done }));
  }

  cut(): void {
    this.cutOff = true;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.cutOff = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

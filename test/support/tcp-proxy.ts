/**
 * A TCP proxy on loopback in front of one server (the test's Postgres), for faults of one
 * process's database link: `cut()` drops every connection and refuses new ones at once (a cable
 * pulled, a firewall), `restore()` lets them through again. Other processes, connected directly,
 * keep their database.
 */
import net from "node:net";

export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private cutOff = false;

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
      client.pipe(upstream).pipe(client);
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

/**
 * A TCP proxy on loopback in front of one server (the test's Postgres), for faults of one
 * process's database link: `cut()` drops every connection and refuses new ones at once (a cable
 * pulled, a firewall), `restore()` lets them through again. `stall()` keeps every connection open
 * but forwards nothing either way (a hung network path, a frozen database host: TCP stays up, no
 * byte moves; new connections wait too) until `unstall()`; `stallWhen(marker)` does so in the middle of
 * a transaction. Other processes, connected directly,
 * keep their database. `loseCommitAcknowledgement(marker)`: the next transaction whose statements
 * mention `marker` commits in Postgres, but the connection drops before the client hears so (the
 * client cannot tell whether it committed). `slow(ms)` delays every chunk by `ms` each way, in
 * order (a congested or distant database: every round trip takes 2 × ms longer) until `slow(0)`.
 */
import net from "node:net";

/** A CommandComplete message's tag for COMMIT, as Postgres sends it. */
const COMMIT_COMPLETE = Buffer.from("COMMIT\0");

export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private cutOff = false;
  private stalled = false;
  /** Connections accepted while stalled: piped once the stall ends. */
  private held: net.Socket[] = [];
  private commitLoss: { marker: Buffer; done: () => void } | null = null;
  private stallOn: { marker: Buffer; done: () => void } | null = null;
  private latencyMs = 0;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    const server = net.createServer((client) => {
      if (proxy!.cutOff) return void client.destroy();
      if (proxy!.stalled) {
        client.pause();
        client.on("error", () => {});
        return void proxy!.held.push(client);
      }
      const upstream = net.connect(target.port, target.host);
      for (const s of [client, upstream]) {
        proxy!.sockets.add(s);
        s.on("close", () => proxy!.sockets.delete(s));
        s.on("error", () => {});
      }
      // The client's statements since its last commit mention the armed marker.
      let marked = false;
      // Chunks go out in order: none before the one forwarded ahead of it in the same direction.
      const delayed = (to: net.Socket) => {
        let due = 0;
        return (chunk: Buffer) => {
          const latency = proxy!.latencyMs;
          if (latency <= 0 && due <= performance.now()) return void to.write(chunk);
          due = Math.max(due, performance.now() + latency);
          setTimeout(() => to.writable && to.write(chunk), due - performance.now());
        };
      };
      const toUpstream = delayed(upstream);
      const toClient = delayed(client);
      client.on("data", (chunk: Buffer) => {
        const loss = proxy!.commitLoss;
        if (loss && chunk.includes(loss.marker)) marked = true;
        toUpstream(chunk);
        const stallOn = proxy!.stallOn;
        if (stallOn && chunk.includes(stallOn.marker)) {
          proxy!.stallOn = null;
          proxy!.stall();
          stallOn.done();
        }
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
        toClient(chunk);
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

  /**
   * Stalls the link (as `stall()`) right after the first statement that mentions `marker` has gone
   * to the server: mid-transaction, the server runs it and waits for a COMMIT that never comes.
   */
  stallWhen(marker: string): Promise<void> {
    return new Promise((done) => (this.stallOn = { marker: Buffer.from(marker), done }));
  }

  /** Every chunk, both ways, waits `ms` before it goes on (0: none; order is kept either way). */
  slow(ms: number): void {
    this.latencyMs = ms;
  }

  /** Stops every byte both ways (sockets paused: the kernel buffers fill, nothing is closed). */
  stall(): void {
    this.stalled = true;
    for (const s of this.sockets) s.pause();
  }

  unstall(): void {
    this.stalled = false;
    for (const s of this.sockets) s.resume();
    const held = this.held;
    this.held = [];
    for (const client of held) {
      this.server.emit("connection", client);
      client.resume();
    }
  }

  cut(): void {
    this.cutOff = true;
    for (const s of this.held.splice(0)) s.destroy();
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.cutOff = false;
  }

  async close(): Promise<void> {
    this.cut();
    this.unstall();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

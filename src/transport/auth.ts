/**
 * Who may connect (docs/security.md, "Who can connect"): by default a WebSocket or HTTP client
 * must present the server's token, and a client on the loopback interface must also run as the
 * server's own user. Another local user can reach 127.0.0.1 but can read neither the token
 * (mode 0600 in the server's 0700 home) nor pass the user check; a sandboxed command with the
 * network can reach 127.0.0.1 as the server's user but cannot read the token (the home is hidden).
 *
 * The token is generated at first start into `<home>/auth-token`: 32 random bytes, base64url,
 * written to a temporary file with mode 0600 and linked into place (so it appears whole, and two
 * processes starting at once — `--workers` — end up with the same one). It is never logged.
 */
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import net from "node:net";
import path from "node:path";

export const AUTH_TOKEN_FILE = "auth-token";

export interface HomeToken {
  token: string;
  file: string;
  /** Made by this call (first start), or replaced because its permissions were too open. */
  created: boolean;
  /** Why an existing file was replaced, if it was. */
  replaced?: string;
}

async function writeNew(file: string): Promise<string | null> {
  const token = randomBytes(32).toString("base64url");
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString("hex")}`;
  await fs.writeFile(tmp, `${token}\n`, { mode: 0o600, flag: "wx" });
  try {
    await fs.link(tmp, file);
    return token;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return null; // another process made it first
    throw err;
  } finally {
    // The outcome (our token, null or the error) stands either way; a temp file left behind is the
    // owner's own 0600 file beside the token file, readable by nobody else.
    await fs.unlink(tmp).catch(() => undefined);
  }
}

/** Why an existing token file cannot be trusted (others could have read it), or null. */
function untrusted(st: { mode: number; uid: number; isFile(): boolean }): string | null {
  if (!st.isFile()) return "it is not a regular file";
  if (typeof process.getuid === "function" && st.uid !== process.getuid()) return `it belongs to uid ${st.uid}, not to the server's user`;
  if ((st.mode & 0o077) !== 0) return `its mode ${(st.mode & 0o777).toString(8)} lets other users read it`;
  return null;
}

/**
 * The token in `<home>/auth-token`, made when missing. A file others could have read (group or
 * world permissions, another owner) is replaced by a new token: the old one may be known.
 */
export async function loadOrCreateHomeToken(home: string): Promise<HomeToken> {
  const file = path.join(home, AUTH_TOKEN_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    const handle = await fs.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return null;
      throw err;
    });
    if (handle === null) {
      const token = await writeNew(file);
      if (token !== null) return { token, file, created: true };
      continue;
    }
    let replaced: string | null;
    let token: string;
    try {
      replaced = untrusted(await handle.stat());
      token = (await handle.readFile("utf8")).trim();
    } finally {
      await handle.close();
    }
    if (replaced === null && token.length >= 16) return { token, file, created: false };
    const why = replaced ?? "it holds no usable token";
    await fs.rm(file, { force: true });
    const fresh = await writeNew(file);
    if (fresh !== null) return { token: fresh, file, created: true, replaced: why };
  }
  throw new Error(`cannot create the auth token ${file}: it keeps changing under us`);
}


// ---------------------------------------------------------------------------------------------
// The peer's user: which uid owns the other end of a loopback TCP connection (Linux)

function ipv4Hex(ip: string): string {
  return ip
    .split(".")
    .map((o) => Number(o).toString(16).padStart(2, "0"))
    .reverse()
    .join("")
    .toUpperCase();
}

/** The 16 bytes of an IPv6 address (IPv4-mapped ones included). */
function ipv6Bytes(ip: string): number[] {
  let text = ip;
  let tail: number[] = [];
  const v4 = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    tail = v4[1]!.split(".").map(Number);
    text = text.slice(0, -v4[1]!.length) + "0:0";
  }
  const [head, rest] = text.split("::") as [string, string | undefined];
  const groups = (s: string | undefined) => (s ? s.split(":").filter(Boolean) : []);
  const h = groups(head);
  const r = groups(rest);
  const all = rest === undefined ? h : [...h, ...Array(8 - h.length - r.length).fill("0"), ...r];
  const bytes = all.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** /proc/net/tcp6's spelling: four 32-bit words, each in host (little-endian) byte order. */
function ipv6Hex(ip: string): string {
  const b = ipv6Bytes(ip);
  let out = "";
  for (let w = 0; w < 16; w += 4) out += [b[w + 3], b[w + 2], b[w + 1], b[w]].map((x) => x!.toString(16).padStart(2, "0")).join("");
  return out.toUpperCase();
}

const portHex = (port: number) => port.toString(16).padStart(4, "0").toUpperCase();

/** How the (address, port) of a socket is written in /proc/net/tcp (IPv4) and tcp6. */
function procSpellings(address: string, port: number): Array<{ file: "tcp" | "tcp6"; key: string }> {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const v4 = net.isIPv4(address) ? address : mapped;
  const out: Array<{ file: "tcp" | "tcp6"; key: string }> = [];
  if (v4) out.push({ file: "tcp", key: `${ipv4Hex(v4)}:${portHex(port)}` });
  out.push({ file: "tcp6", key: `${ipv6Hex(v4 ? `::ffff:${v4}` : address)}:${portHex(port)}` });
  return out;
}

export interface SocketEnds {
  remoteAddress?: string;
  remotePort?: number;
  localAddress?: string;
  localPort?: number;
}

/** Loopback: 127.0.0.0/8, ::1, and IPv4-mapped 127.x. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  return /^(::ffff:)?127\.\d+\.\d+\.\d+$/i.test(address) || address === "::1";
}

/**
 * The uid owning the client end of `ends` (a connection accepted by this process), from
 * /proc/net/tcp{,6}: the line whose local address is the peer's and whose remote address is ours.
 * Null when it is not found (the client went away meanwhile) or /proc/net is not there.
 */
export async function peerUid(ends: SocketEnds, procNet = "/proc/net"): Promise<number | null> {
  const { remoteAddress, remotePort, localAddress, localPort } = ends;
  if (!remoteAddress || !remotePort || !localAddress || !localPort) return null;
  const peer = procSpellings(remoteAddress, remotePort);
  const ours = procSpellings(localAddress, localPort);
  for (const file of ["tcp", "tcp6"] as const) {
    const peerKey = peer.find((p) => p.file === file)?.key;
    const ourKey = ours.find((p) => p.file === file)?.key;
    if (!peerKey || !ourKey) continue;
    const text = await fs.readFile(path.join(procNet, file), "utf8").catch(() => "");
    for (const line of text.split("\n")) {
      // "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
      const cols = line.trim().split(/\s+/);
      if (cols[1] === peerKey && cols[2] === ourKey) return Number(cols[7]);
    }
  }
  return null;
}

/** Whether the peer-user check can work here (Linux with /proc/net/tcp). */
export async function peerUidSupported(procNet = "/proc/net"): Promise<boolean> {
  if (process.platform !== "linux" || typeof process.getuid !== "function") return false;
  return fs.access(path.join(procNet, "tcp")).then(
    () => true,
    () => false,
  );
}

/**
 * The bubblewrap command line for a confinement. Mount order matters: later mounts cover earlier
 * ones: everything read-only, fresh /dev and /proc, then writable roots, read-only holes inside them
 * (`.git`) and masks over secrets in order of depth; last, the masks are made read-only.
 *
 * Namespaces: a new PID namespace with a fresh /proc (the command cannot see, signal or read the
 * environment of the server or any other process), a user namespace with every capability dropped
 * and nested user namespaces disabled (so the command cannot remount what we mounted), new IPC/UTS
 * namespaces, and a new network namespace (loopback only) unless the policy grants the network.
 * --new-session detaches it from any terminal (no TIOCSTI keystroke injection); --die-with-parent
 * kills the whole sandbox when the server dies, kill -9 included. When the command's first process
 * exits, bwrap's PID 1 exits and the kernel kills every other process in the namespace, so
 * `setsid -f`, `nohup` and `&` cannot outlive the command.
 */
import type { Confinement } from "./policy.js";

export interface MaskedPath {
  path: string;
  kind: "file" | "dir";
}

export interface BwrapInvocation {
  confinement: Confinement;
  cwd: string;
  /** Existing paths to hide (the server's home, token files, /run's sockets …). */
  masks: readonly MaskedPath[];
  argv: readonly string[];
}

export function bwrapArgs(inv: BwrapInvocation): string[] {
  const { confinement: c } = inv;
  const args = [
    "--unshare-user",
    "--disable-userns",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(c.network ? [] : ["--unshare-net"]),
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
  ];
  // Mounts cover what is below them, so they go in order of depth, parents first: a writable /tmp
  // before a mask of the server's home inside it, the mask before a workspace inside the home, a
  // workspace before its `.git`. At equal paths a mask goes first and the workspace wins (the user
  // chose that directory), and a mask under a bind is never remounted read-only with it.
  const ops: Array<{ path: string; rank: number; args: string[] }> = [];
  const exposed = new Set(c.writableRoots);
  for (const m of inv.masks) {
    if (exposed.has(m.path)) continue;
    ops.push({ path: m.path, rank: 0, args: m.kind === "dir" ? ["--tmpfs", m.path] : ["--ro-bind", "/dev/null", m.path] });
  }
  for (const root of c.writableRoots) ops.push({ path: root, rank: 1, args: ["--bind", root, root] });
  for (const p of c.readOnlyPaths) ops.push({ path: p, rank: 2, args: ["--ro-bind", p, p] });
  // The fresh /dev hides the host's /dev/shm: a working directory there (a RAM-disk checkout) is
  // bound back read-only, or a read-only command could not even start in it. Writable roots
  // under /dev are bound above like any other.
  const under = (p: string, root: string) => p === root || p.startsWith(root.endsWith("/") ? root : `${root}/`);
  if (under(inv.cwd, "/dev") && !c.writableRoots.some((r) => under(inv.cwd, r))) {
    ops.push({ path: inv.cwd, rank: 2, args: ["--ro-bind", inv.cwd, inv.cwd] });
  }
  const depth = (p: string) => (p === "/" ? 0 : p.split("/").length);
  ops.sort((a, b) => depth(a.path) - depth(b.path) || a.rank - b.rank);
  for (const op of ops) args.push(...op.args);
  for (const m of inv.masks) if (m.kind === "dir" && !exposed.has(m.path)) args.push("--remount-ro", m.path);
  args.push("--chdir", inv.cwd, "--", ...inv.argv);
  return args;
}

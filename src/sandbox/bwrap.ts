/**
 * The bubblewrap command line for a confinement. Mount order matters: later mounts cover earlier
 * ones: everything read-only, fresh /dev and /proc, then the view's mounts (view.ts: masks over
 * secrets, the private /tmp, writable roots, pins and read-only holes, in order of depth); last,
 * the masks are made read-only.
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
export interface BwrapInvocation {
  network: boolean;
  cwd: string;
  /** The view's mounts, in order (SandboxView.mountArgs). */
  mounts: readonly string[];
  /** Masked directories to make read-only once everything is mounted. */
  readOnlyMasks: readonly string[];
  argv: readonly string[];
}

export function bwrapArgs(inv: BwrapInvocation): string[] {
  const args = [
    "--unshare-user",
    "--disable-userns",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(inv.network ? [] : ["--unshare-net"]),
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
    ...inv.mounts,
  ];
  for (const m of inv.readOnlyMasks) args.push("--remount-ro", m);
  args.push("--chdir", inv.cwd, "--", ...inv.argv);
  return args;
}

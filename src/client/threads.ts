/** `app-server threads`: lists threads (newest activity first) from a server or the embedded one. */
import { parseArgs } from "node:util";
import { EXIT, processIo, type ExecIo } from "./exec.js";
import { openSession, UsageError } from "./session.js";

export const THREADS_OPTIONS = {
  url: { type: "string" },
  home: { type: "string" },
  token: { type: "string" },
  search: { type: "string" },
  limit: { type: "string" },
  archived: { type: "boolean" },
  json: { type: "boolean" },
} as const;

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

/** Unix seconds → "YYYY-MM-DD HH:MM" in local time. */
function localTime(unixSeconds: number): string {
  const d = new Date(unixSeconds * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

export async function runThreads(args: string[], io: ExecIo = processIo()): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args, options: THREADS_OPTIONS, allowPositionals: false, strict: true }));
  } catch (err) {
    io.stderr.write(`app-server threads: ${(err as Error).message}\n`);
    return EXIT.usage;
  }
  const limit = values.limit === undefined ? 25 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
    io.stderr.write(`app-server threads: --limit must be a whole number from 1 to 100 (got ${values.limit})\n`);
    return EXIT.usage;
  }
  if (values.url !== undefined && values.home !== undefined) {
    io.stderr.write("app-server threads: --home is for the embedded server; it cannot be combined with --url\n");
    return EXIT.usage;
  }
  let session;
  try {
    session = await openSession({ url: values.url, home: values.home, token: values.token ?? (io.env.APP_SERVER_AUTH_TOKEN || undefined), env: io.env }, "app-server-threads");
  } catch (err) {
    io.stderr.write(`app-server threads: ${(err as Error).message}\n`);
    return err instanceof UsageError ? EXIT.usage : EXIT.failed;
  }
  try {
    const page = await session.client.request("thread/list", {
      limit,
      sortKey: "updated_at",
      sortDirection: "desc",
      ...(values.search ? { searchTerm: values.search } : {}),
      ...(values.archived ? { archived: true } : {}),
    });
    if (values.json) {
      for (const t of page.data) io.stdout.write(`${JSON.stringify(t)}\n`);
    } else if (page.data.length === 0) {
      io.stderr.write(values.search ? `no thread matches "${values.search}"\n` : "no threads yet\n");
    } else {
      for (const t of page.data) {
        const status = t.status?.type === "active" ? "active" : t.status?.type === "systemError" ? "error" : "";
        const label = oneLine(t.name || t.preview || "(no messages yet)", 80);
        // A fork carries its parent's name or preview: say whose fork it is.
        const fork = t.forkedFromId ? `  (fork of ${t.forkedFromId})` : "";
        io.stdout.write(`${t.id}  ${localTime(t.updatedAt)}  ${status ? `[${status}] ` : ""}${label}${fork}\n`);
      }
      if (page.nextCursor) io.stderr.write(`(more threads: raise --limit, up to 100, or narrow with --search)\n`);
    }
    return EXIT.completed;
  } catch (err) {
    io.stderr.write(`app-server threads: ${(err as Error).message}\n`);
    return EXIT.failed;
  } finally {
    // The output is written and the exit code decided; a failed close (of the connection or of the
    // embedded server) changes neither, and the process exits right after, ending whatever it left open.
    await session.close().catch(() => {});
  }
}

/**
 * The pre-initialised PGlite data directory (issue 16). A fresh home's first start used to run
 * initdb: 3.3–3.7 s, and the process kept ~800 MB RSS for its life. `npm run build` (which
 * `npm ci` runs through `prepare`) writes a dump of an initdb'd, migrated data directory into
 * dist/ once; a fresh home loads it instead (PGlite's `loadDataDir`). Migrations newer than the
 * dump still run at open, as on any existing home.
 *
 * The seed is unpacked into the new data directory here (a few ms of file writes), and PGlite then
 * opens it like any existing home: handing the dump to PGlite's `loadDataDir` instead kept ~100 MB
 * more RSS (its copies of the 40 MB tarball stayed referenced).
 *
 * The dump leaves out what a fresh home does not need (the template databases, the WAL's zeros:
 * database.ts, createPgliteDump) and is gzip-compressed: ~1 MB in the package, 9 MB unpacked (41 MB
 * before issue 33). gzip's CRC also makes a damaged file fail to load instead of producing a
 * damaged database. A manifest next to it says
 * which PGlite made it: a data directory of another PGlite version is not used.
 */
import { createHash } from "node:crypto";
import { closeSync, ftruncateSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { readdir, readFile, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gunzip as gunzipCb, gzip as gzipCb } from "node:zlib";

const gunzip = promisify(gunzipCb);
const gzip = promisify(gzipCb);

/** dist/pglite-seed.tar.gz of this installation (src/ and dist/ modules both resolve to it). */
export const SEED_FILE = fileURLToPath(new URL("../../dist/pglite-seed.tar.gz", import.meta.url));

export interface SeedManifest {
  /** The @electric-sql/pglite version that wrote the data directory. */
  pglite: string;
  /** Migrations applied in the dump, in order. */
  migrations: string[];
  /** sha256 of the migration files' names and contents: the build rewrites the seed when they change. */
  migrationsHash: string;
  /** How the build made it (SEED_FORMAT): the build rewrites a seed of an older way. */
  format?: number;
}

/**
 * 2: without the template databases and the WAL's zeros (createPgliteDump, packDataDir). Seeds of
 * format 1 still unpack and open; the build replaces them because they unpack 41 MB instead of 9.
 */
export const SEED_FORMAT = 2;

export const manifestFileOf = (seedFile: string) => seedFile.replace(/\.tar\.gz$/, "") + ".json";

let version: string | undefined;
/** The installed PGlite's version (its package.json is not exported, so found next to its entry). */
export function pgliteVersion(): string {
  if (version) return version;
  let dir = path.dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "@electric-sql/pglite" && pkg.version) return (version = pkg.version);
    } catch {
      /* not this directory */
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error("cannot find @electric-sql/pglite's package.json");
    dir = up;
  }
}

export async function migrationsHash(dir: string): Promise<{ names: string[]; hash: string }> {
  const names = (await readdir(dir)).filter((f) => f.endsWith(".sql")).sort();
  const h = createHash("sha256");
  for (const name of names) h.update(`${name}\0`).update(await readFile(path.join(dir, name))).update("\0");
  return { names, hash: h.digest("hex") };
}

export type SeedResult = { ok: true; data: Buffer; manifest: SeedManifest } | { ok: false; reason: string };

/** The seed, or why it cannot be used (missing, unreadable, damaged, another PGlite version). */
export async function readSeed(seedFile: string): Promise<SeedResult> {
  let manifest: SeedManifest;
  try {
    manifest = JSON.parse(await readFile(manifestFileOf(seedFile), "utf8")) as SeedManifest;
  } catch (err) {
    return { ok: false, reason: `no usable seed manifest ${manifestFileOf(seedFile)} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` };
  }
  const installed = pgliteVersion();
  if (manifest.pglite !== installed) return { ok: false, reason: `seed made by PGlite ${manifest.pglite}, installed ${installed}` };
  let packed: Buffer;
  try {
    packed = await readFile(seedFile);
  } catch (err) {
    return { ok: false, reason: `cannot read seed ${seedFile} (${(err as NodeJS.ErrnoException).code ?? "error"})` };
  }
  try {
    // Decompressed here (zlib, off the main thread) rather than by PGlite, and checked on the way.
    return { ok: true, data: await gunzip(packed), manifest };
  } catch (err) {
    return { ok: false, reason: `damaged seed ${seedFile} (${(err as Error).message})` };
  }
}

/**
 * Writes the seed and its manifest (each through a temporary file: a reader never sees half). The
 * manifest goes last; a reader between the two renames may pair a new seed with the old manifest,
 * which only costs a migration run at open (the manifest's PGlite version is what is checked).
 */
export async function writeSeed(seedFile: string, dump: Blob, manifest: SeedManifest): Promise<void> {
  const packed = await gzip(Buffer.from(await dump.arrayBuffer()), { level: 9 });
  // Per-process temporary names: two builds running at once must not write into one file.
  const tmp = `.${process.pid}.tmp`;
  await writeFile(seedFile + tmp, packed);
  await rename(seedFile + tmp, seedFile);
  const manifestFile = manifestFileOf(seedFile);
  await writeFile(manifestFile + tmp, JSON.stringify(manifest, null, 2) + "\n");
  await rename(manifestFile + tmp, manifestFile);
}

const field = (block: Buffer, start: number, length: number) => {
  const raw = block.subarray(start, start + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? length : end).toString("utf8");
};
const octal = (block: Buffer, start: number, length: number) => {
  const text = field(block, start, length).trim();
  if (!/^[0-7]+$/.test(text)) throw new Error(`bad number in tar header: ${JSON.stringify(text)}`);
  return Number.parseInt(text, 8);
};

/** PostgreSQL's page size: the unit in which the data directory's files are mostly zeros. */
const PAGE = 8192;
const ZERO_PAGE = Buffer.alloc(PAGE);

/**
 * Writes `data` to a new file of `size` bytes (the rest zeros), leaving its all-zero pages as
 * holes: a data directory's WAL segment is 16 MiB, almost all zeros, and reading a hole gives the
 * same zeros without their being written at every first start (issue 33: PGlite first start).
 */
function writeSparse(file: string, data: Buffer, size: number): void {
  const fd = openSync(file, "w", 0o600);
  try {
    let start = -1; // start of the current run of non-zero pages
    for (let at = 0; at < data.length; at += PAGE) {
      const end = Math.min(at + PAGE, data.length);
      const zero = data.subarray(at, end).equals(end - at === PAGE ? ZERO_PAGE : ZERO_PAGE.subarray(0, end - at));
      if (!zero && start < 0) start = at;
      if (zero && start >= 0) {
        writeAll(fd, data.subarray(start, at), start);
        start = -1;
      }
    }
    if (start >= 0) writeAll(fd, data.subarray(start), start);
    ftruncateSync(fd, size); // the file's full length, trailing zeros included
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, chunk: Buffer, position: number): void {
  let done = 0;
  while (done < chunk.length) done += writeSync(fd, chunk, done, chunk.length - done, position + done);
}

/**
 * The pax extended-header keyword (a vendor's, which other tar readers ignore) giving the length
 * of the next file when the archive stores it without its trailing zeros: packDataDir leaves out
 * the zero tail of a WAL segment (16 MiB, a few KiB of it written), so a first start neither
 * decompresses nor writes it.
 */
const PAX_SIZE = "AAS.size";

/** The records of a pax extended header (`<length> <key>=<value>\n` each). */
function paxRecords(data: Buffer): Map<string, string> {
  const records = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    const length = Number(data.subarray(at, space).toString("latin1"));
    if (space < 0 || !Number.isInteger(length) || length <= 0 || at + length > data.length) throw new Error(`bad pax header record at byte ${at}`);
    const record = data.subarray(space + 1, at + length - 1).toString("utf8");
    const eq = record.indexOf("=");
    if (eq < 0) throw new Error(`bad pax header record: ${JSON.stringify(record)}`);
    records.set(record.slice(0, eq), record.slice(eq + 1));
    at += length;
  }
  return records;
}

/** One pax record: its length counts its own digits. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let length = Buffer.byteLength(body);
  while (String(length).length + Buffer.byteLength(body) !== length) length = String(length).length + Buffer.byteLength(body);
  return `${length}${body}`;
}

/**
 * Unpacks PGlite's dump (a ustar archive of the data directory: regular files and directories,
 * and pax headers giving a file's length past its stored bytes) into `dir`, which must not exist.
 * It is written next to `dir` and renamed into place, so a crash half-way never leaves a data
 * directory that looks complete (PG_VERSION present).
 */
export function unpackSeed(tar: Buffer, dir: string): void {
  const tmp = `${dir}.unpacking`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true, mode: 0o700 });
  // ~1 000 files in a few dozen directories: each directory is made once, not once per file.
  const made = new Set<string>([tmp]);
  const makeDir = (d: string) => {
    if (made.has(d)) return;
    mkdirSync(d, { recursive: true, mode: 0o700 });
    made.add(d);
  };
  try {
    let offset = 0;
    let files = 0;
    /** The next file's length from a pax header (null: its stored length). */
    let paxSize: number | null = null;
    while (offset + 512 <= tar.length) {
      const header = tar.subarray(offset, offset + 512);
      if (header.every((b) => b === 0)) break; // end of archive
      let sum = 0;
      for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : header[i]!;
      if (sum !== octal(header, 148, 8)) throw new Error(`bad tar header checksum at byte ${offset}`);
      const prefix = field(header, 345, 155);
      const name = (prefix ? `${prefix}/` : "") + field(header, 0, 100);
      const size = octal(header, 124, 12);
      const type = String.fromCharCode(header[156]!);
      const target = path.resolve(tmp, `./${name}`);
      if (target !== tmp && !target.startsWith(tmp + path.sep)) throw new Error(`tar entry outside the directory: ${name}`);
      offset += 512;
      if (offset + size > tar.length) throw new Error(`truncated tar entry ${name}`);
      if (type === "x") {
        const stated = paxRecords(tar.subarray(offset, offset + size)).get(PAX_SIZE);
        paxSize = stated === undefined ? null : Number(stated);
        if (paxSize !== null && !(Number.isSafeInteger(paxSize) && paxSize >= 0)) throw new Error(`bad ${PAX_SIZE} in the pax header of ${name}`);
      } else if (type === "5") makeDir(target);
      else if (type === "0" || type === "\0") {
        makeDir(path.dirname(target));
        const real = paxSize ?? size;
        if (real < size) throw new Error(`${PAX_SIZE} ${real} is shorter than the stored ${size} bytes of ${name}`);
        writeSparse(target, tar.subarray(offset, offset + size), real);
        paxSize = null;
        files++;
      } else throw new Error(`unsupported tar entry type ${JSON.stringify(type)} (${name})`);
      offset += Math.ceil(size / 512) * 512;
    }
    if (files === 0) throw new Error("empty seed archive");
    renameSync(tmp, dir);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

/** The length of `data` without its trailing zero bytes. */
function withoutZeroTail(data: Buffer): number {
  let end = data.length;
  while (end > 0 && data[end - 1] === 0) end--;
  return end;
}

/**
 * A ustar archive of the data directory `dir` (directories and regular files, as unpackSeed reads
 * it): the build archives a closed, cleanly shut down directory (createPgliteDump). A file's
 * trailing zeros are left out, its length given in a pax header.
 */
export function packDataDir(dir: string): Buffer {
  const parts: Buffer[] = [];
  const add = (name: string, type: "0" | "5" | "x", data: Buffer) => {
    parts.push(tarHeader(name, type, data.length), data, Buffer.alloc((512 - (data.length % 512)) % 512));
  };
  const addFile = (name: string, data: Buffer) => {
    const stored = withoutZeroTail(data);
    if (stored < data.length) add(`PaxHeaders/${path.basename(name)}`, "x", Buffer.from(paxRecord(PAX_SIZE, String(data.length))));
    add(name, "0", data.subarray(0, stored));
  };
  const walk = (rel: string) => {
    for (const e of readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const name = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        add(`${name}/`, "5", Buffer.alloc(0));
        walk(name);
      } else if (e.isFile()) addFile(name, readFileSync(path.join(dir, name)));
      else throw new Error(`not a regular file or directory: ${name}`);
    }
  };
  walk("");
  parts.push(Buffer.alloc(1024)); // end of archive
  return Buffer.concat(parts);
}

function tarHeader(name: string, type: "0" | "5" | "x", size: number): Buffer {
  // Names longer than 100 bytes are split at a "/" into prefix (≤ 155) and name (≤ 100).
  let prefix = "";
  let rest = name;
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf("/", name.length - 2);
    prefix = name.slice(0, cut);
    rest = name.slice(cut + 1);
    if (cut < 0 || Buffer.byteLength(prefix) > 155 || Buffer.byteLength(rest) > 100) throw new Error(`name too long for a tar header: ${name}`);
  }
  const h = Buffer.alloc(512);
  h.write(rest, 0, 100);
  h.write(type === "5" ? "0000700\0" : "0000600\0", 100);
  h.write("0000000\0", 108); // uid
  h.write("0000000\0", 116); // gid
  h.write(size.toString(8).padStart(11, "0") + "\0", 124);
  h.write("00000000000\0", 136); // mtime
  h.write(type, 156);
  h.write("ustar\0" + "00", 257);
  h.write(prefix, 345, 155);
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i]!;
  h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
  return h;
}

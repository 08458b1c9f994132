// Writes dist/pglite-seed.tar.gz (+ .json): a dump of an initdb'd PGlite data directory with every
// migration applied, which fresh homes load instead of running initdb (issue 16; see
// src/store/pglite-seed.ts). Runs after tsc in `npm run build`; skipped when the seed on disk was
// made by the installed PGlite from the same migrations, the same way (SEED_FORMAT) (initdb costs
// seconds and ~800 MB).
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const { createPgliteDump } = await import(`${root}dist/store/database.js`);
const { SEED_FILE, SEED_FORMAT, manifestFileOf, migrationsHash, pgliteVersion, writeSeed } = await import(`${root}dist/store/pglite-seed.js`);
const { MIGRATIONS_DIR } = await import(`${root}dist/store/migrate.js`);

const { hash } = await migrationsHash(MIGRATIONS_DIR);
const current = await readFile(manifestFileOf(SEED_FILE), "utf8").then(JSON.parse, () => null);
const force = process.argv.includes("--force");
if (!force && current?.pglite === pgliteVersion() && current?.migrationsHash === hash && current?.format === SEED_FORMAT) {
  await readFile(SEED_FILE).then(
    () => process.exit(0),
    () => {},
  );
}
const t0 = performance.now();
const { dump, migrations } = await createPgliteDump(MIGRATIONS_DIR);
await writeSeed(SEED_FILE, dump, { pglite: pgliteVersion(), migrations, migrationsHash: hash, format: SEED_FORMAT });
process.stderr.write(`wrote ${SEED_FILE} (PGlite ${pgliteVersion()}, ${migrations.length} migrations) in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);

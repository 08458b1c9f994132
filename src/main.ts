/** Process entry: `node dist/main.js …` (bin/app-server.js) or `tsx src/main.ts …` in tests. */
import { main } from "./cli.js";

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`app-server: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);

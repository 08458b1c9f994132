/** Process entry: `node dist/main.js …` (bin/app-server.js) or `tsx src/main.ts …` in tests. */
import { main } from "./cli.js";

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    // An unexpected failure: the message; the stack only when asked for (APP_SERVER_LOG_LEVEL=debug).
    const debug = ["debug", "trace"].includes(process.env.APP_SERVER_LOG_LEVEL ?? "");
    process.stderr.write(`app-server: ${err instanceof Error ? ((debug ? err.stack : undefined) ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);

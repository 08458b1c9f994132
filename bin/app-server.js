#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm install` via the prepare script).
import { main } from "../dist/cli.js";

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`app-server: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);

import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores on CI: a few forks keep PGlite's WASM start-up from starving the sockets.
    pool: "forks",
    maxWorkers: 2,
  },
});

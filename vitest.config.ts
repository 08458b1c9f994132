import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Generous: CI is a shared 2-core machine; no test asserts on time.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores on CI: a few forks keep PGlite's WASM start-up from starving the sockets.
    pool: "forks",
    maxWorkers: 2,
  },
});

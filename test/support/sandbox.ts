/**
 * Whether tests that need the OS sandbox (bubblewrap) can run here. Where it is missing they are
 * skipped with the reason printed; with REQUIRE_SANDBOX=1 (set by .ci/run) a missing sandbox is
 * a failure instead, so CI can never pass by skipping them.
 */
import { CommandRunner, type SandboxStatus } from "../../src/sandbox/runner.js";

export const sandboxStatus: SandboxStatus = await new CommandRunner().status();

if (!sandboxStatus.available) {
  if (process.env.REQUIRE_SANDBOX === "1") throw new Error(`REQUIRE_SANDBOX=1 but the OS sandbox is not available: ${sandboxStatus.reason}`);
  console.warn(`[skipped] tests that run commands in the OS sandbox: ${sandboxStatus.reason} (install bubblewrap to run them)`);
}

/** For describe.skipIf / it.skipIf. */
export const noSandbox = !sandboxStatus.available;

/**
 * How long a silent process keeps its leases, from the environment. Its own module, with nothing
 * to import: the store's options need it (a session idle in a transaction ends with the leases,
 * open-store.ts), and the CLI opens the store before the server's modules load.
 */

/** How long a process that stopped renewing keeps its leases (and registration) by default. */
export const DEFAULT_LEASE_TTL_MS = 30_000;

/** A positive integer setting, or the fallback when it is absent or not one. */
export function positiveSetting(text: string | undefined, fallback: number): number {
  const n = Number(text);
  return text !== undefined && Number.isSafeInteger(n) && n > 0 ? n : fallback;
}

/** APP_SERVER_LEASE_TTL_MS, or the default: how long a silent process keeps its leases. */
export function leaseTtlFromEnv(env: NodeJS.ProcessEnv): number {
  return positiveSetting(env.APP_SERVER_LEASE_TTL_MS, DEFAULT_LEASE_TTL_MS);
}

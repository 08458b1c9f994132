/**
 * hooks/list: lifecycle hooks configured per working directory. This server runs no hooks yet, so
 * every directory has none; the function is its own module so hook support can fill it in
 * without touching the other start-up answers.
 */
export interface HooksListEntry {
  cwd: string;
  hooks: unknown[];
  warnings: string[];
  errors: unknown[];
}

export async function listHooks(cwds: string[], registry?: { list(cwds: readonly string[]): HooksListEntry[] } | null): Promise<HooksListEntry[]> {
  // The configured hooks (src/hooks, issue 13) when there are any.
  if (registry) return registry.list(cwds);
  return cwds.map((cwd) => ({ cwd, hooks: [], warnings: [], errors: [] }));
}

/**
 * hooks/list: the lifecycle hooks configured per working directory (src/hooks), with the problems
 * their configuration has (a hooks file with errors and no usable hook still lists its errors);
 * without a hooks configuration, every directory has none.
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

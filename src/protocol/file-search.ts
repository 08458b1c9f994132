/**
 * Fuzzy file search (Codex's `fuzzyFileSearch` and its session variant), for `@` file mentions:
 * the files under `roots`, fuzzy-ranked against `query`. Field names are Codex's, snake_case
 * ones included.
 */
import { z } from "zod";

/** At most this many characters per query (a longer one is a client bug, not a file name). */
export const FILE_SEARCH_MAX_QUERY = 1000;
/** At most this many roots per search. */
export const FILE_SEARCH_MAX_ROOTS = 16;

const query = z.string().max(FILE_SEARCH_MAX_QUERY, `a file search query is at most ${FILE_SEARCH_MAX_QUERY} characters`);
const roots = z.array(z.string()).max(FILE_SEARCH_MAX_ROOTS, `at most ${FILE_SEARCH_MAX_ROOTS} roots`);
const sessionId = z.string().max(256, "a sessionId is at most 256 characters");

export const FuzzyFileSearchMatchType = z.enum(["file", "directory"]).meta({ id: "FuzzyFileSearchMatchType" });

export const FuzzyFileSearchResult = z
  .object({
    /** The root (as the client sent it) the path is relative to. */
    root: z.string(),
    /** Relative to `root`, `/`-separated. */
    path: z.string(),
    match_type: FuzzyFileSearchMatchType,
    file_name: z.string(),
    score: z.number().int().nonnegative(),
    /** Matched character positions in `path`, ascending. */
    indices: z.array(z.number().int().nonnegative()).nullable().optional(),
  })
  .meta({ id: "FuzzyFileSearchResult" });

export const FuzzyFileSearchParams = z
  .object({
    query,
    roots,
    /** A later request with the same token cancels this one (it is answered with no files). */
    cancellationToken: z.string().max(256).nullable().optional(),
  })
  .meta({ id: "FuzzyFileSearchParams" });
export const FuzzyFileSearchResponse = z.object({ files: z.array(FuzzyFileSearchResult) }).meta({ id: "FuzzyFileSearchResponse" });

export const FuzzyFileSearchSessionStartParams = z.object({ sessionId, roots }).meta({ id: "FuzzyFileSearchSessionStartParams" });
export const FuzzyFileSearchSessionStartResponse = z.object({}).meta({ id: "FuzzyFileSearchSessionStartResponse" });
export const FuzzyFileSearchSessionUpdateParams = z.object({ sessionId, query }).meta({ id: "FuzzyFileSearchSessionUpdateParams" });
export const FuzzyFileSearchSessionUpdateResponse = z.object({}).meta({ id: "FuzzyFileSearchSessionUpdateResponse" });
export const FuzzyFileSearchSessionStopParams = z.object({ sessionId }).meta({ id: "FuzzyFileSearchSessionStopParams" });
export const FuzzyFileSearchSessionStopResponse = z.object({}).meta({ id: "FuzzyFileSearchSessionStopResponse" });

/** The results of a session's latest query (sent once per query, before `sessionCompleted`). */
export const FuzzyFileSearchSessionUpdatedNotification = z
  .object({ sessionId: z.string(), query: z.string(), files: z.array(FuzzyFileSearchResult) })
  .meta({ id: "FuzzyFileSearchSessionUpdatedNotification" });
/** The search for the session's latest query has finished. */
export const FuzzyFileSearchSessionCompletedNotification = z
  .object({ sessionId: z.string() })
  .meta({ id: "FuzzyFileSearchSessionCompletedNotification" });

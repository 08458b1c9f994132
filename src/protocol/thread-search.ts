/** Our extension: thread/search, full-text search over names, previews and messages. */
import { z } from "zod";
import { Thread, ThreadSourceKind } from "./thread.js";

export const ThreadSearchParams = z
  .object({
    /** Web-search syntax over whole words: `parser bug` (both), `"parser bug"` (phrase), `parser or lexer`, `-bug`. */
    query: z.string().max(1000, "a search query is at most 1000 characters").optional(),
    /**
     * Codex's own form of this method (the TUI's `@` task mentions send it): the same search,
     * answered in Codex's shape (`snippet` a string, `backwardsCursor`). Give `query` or `searchTerm`.
     */
    searchTerm: z.string().max(1000, "a search term is at most 1000 characters").optional(),
    limit: z.number().int().min(1).max(100).nullable().optional(),
    /** nextCursor of the previous page. */
    cursor: z.string().nullable().optional(),
    /** Search archived threads instead (default false), as thread/list's `archived`. */
    archived: z.boolean().nullable().optional(),
    // Codex's other fields, accepted and ignored: results are always newest activity first.
    includeAttachedThreads: z.boolean().optional(),
    currentAccountOnly: z.boolean().optional(),
    sortKey: z.enum(["created_at", "updated_at", "recency_at"]).nullable().optional(),
    sortDirection: z.enum(["asc", "desc"]).nullable().optional(),
    sourceKinds: z.array(ThreadSourceKind).nullable().optional(),
  })
  .refine((p) => (p.query === undefined) !== (p.searchTerm === undefined), { message: "give exactly one of query and searchTerm", path: ["query"] })
  .meta({ id: "ThreadSearchParams" });
export type ThreadSearchParams = z.infer<typeof ThreadSearchParams>;

export const ThreadSearchSnippet = z
  .object({
    /** A short excerpt around the first matches (up to ~24 words). */
    text: z.string(),
    /** The matched words in `text`, as [start, end) UTF-16 offsets. */
    highlights: z.array(z.object({ start: z.number().int(), end: z.number().int() })),
    /** `thread`: the name or preview matched; `message`: the newest matching user/agent message. */
    source: z.enum(["thread", "message"]),
    itemId: z.string().nullable(),
  })
  .meta({ id: "ThreadSearchSnippet" });

export const ThreadSearchResult = z.object({ thread: Thread, snippet: ThreadSearchSnippet.nullable() }).meta({ id: "ThreadSearchResult" });

/** Codex's result shape, for requests with `searchTerm`: the snippet's text only. */
export const CodexThreadSearchResult = z.object({ thread: Thread, snippet: z.string() }).meta({ id: "CodexThreadSearchResult" });

export const ThreadSearchResponse = z
  .union([
    z.object({ data: z.array(ThreadSearchResult), nextCursor: z.string().nullable() }),
    z.object({ data: z.array(CodexThreadSearchResult), nextCursor: z.string().nullable(), backwardsCursor: z.string().nullable() }),
  ])
  .meta({ id: "ThreadSearchResponse" });

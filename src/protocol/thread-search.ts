/** Our extension: thread/search, full-text search over names, previews and messages. */
import { z } from "zod";
import { Thread } from "./thread.js";

export const ThreadSearchParams = z
  .object({
    /** Web-search syntax over whole words: `parser bug` (both), `"parser bug"` (phrase), `parser or lexer`, `-bug`. */
    query: z.string().max(1000, "a search query is at most 1000 characters"),
    limit: z.number().int().min(1).max(100).nullable().optional(),
    /** nextCursor of the previous page. */
    cursor: z.string().nullable().optional(),
    /** Search archived threads instead (default false), as thread/list's `archived`. */
    archived: z.boolean().nullable().optional(),
  })
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

export const ThreadSearchResponse = z
  .object({ data: z.array(ThreadSearchResult), nextCursor: z.string().nullable() })
  .meta({ id: "ThreadSearchResponse" });

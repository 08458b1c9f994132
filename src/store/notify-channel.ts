/**
 * Postgres LISTEN/NOTIFY as a message channel between server processes — the only broker the
 * server has (runtime/remote-commands.ts, runtime/fanout.ts). A notification reaches whoever
 * listens on its channel when it is sent; nothing is kept for a listener that comes later.
 */
import type { Sql } from "postgres";

/** A LISTEN in effect. */
export interface Listening {
  unlisten(): Promise<void>;
}

export interface NotifyChannel {
  /**
   * Resolves once LISTEN on `channel` is in effect; `onMessage` gets each notification's text.
   * `onListen` is called each time LISTEN takes effect: first, and again after the link was lost
   * and re-established (whatever was sent meanwhile is gone).
   */
  listen(channel: string, onMessage: (text: string) => void, onListen?: () => void): Promise<Listening>;
  /** Sends `text` to the current listeners of `channel`. */
  notify(channel: string, text: string): Promise<void>;
  /** Sends each `texts[i]` on `channels[i]`, in this order, in one statement. */
  notifyAll(channels: readonly string[], texts: readonly string[]): Promise<void>;
}

export class PgNotifyChannel implements NotifyChannel {
  constructor(private readonly sql: Sql) {}

  async listen(channel: string, onMessage: (text: string) => void, onListen?: () => void): Promise<Listening> {
    return await this.sql.listen(channel, onMessage, onListen);
  }

  async notify(channel: string, text: string): Promise<void> {
    await this.sql`select pg_notify(${channel}, ${text})`;
  }

  async notifyAll(channels: readonly string[], texts: readonly string[]): Promise<void> {
    await this.sql`select pg_notify(c, p) from unnest(${channels as string[]}::text[], ${texts as string[]}::text[]) with ordinality as x(c, p, n) order by n`;
  }
}

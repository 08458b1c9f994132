/**
 * Postgres LISTEN/NOTIFY as a message channel between server processes — the only broker the
 * server has (runtime/remote-commands.ts). A notification reaches whoever listens on its channel
 * when it is sent; nothing is kept for a listener that comes later.
 */
import type { Sql } from "postgres";

/** A LISTEN in effect. */
export interface Listening {
  unlisten(): Promise<void>;
}

export interface NotifyChannel {
  /** Resolves once LISTEN on `channel` is in effect; `onMessage` gets each notification's text. */
  listen(channel: string, onMessage: (text: string) => void): Promise<Listening>;
  /** Sends `text` to the current listeners of `channel`. */
  notify(channel: string, text: string): Promise<void>;
}

export class PgNotifyChannel implements NotifyChannel {
  constructor(private readonly sql: Sql) {}

  async listen(channel: string, onMessage: (text: string) => void): Promise<Listening> {
    return await this.sql.listen(channel, onMessage);
  }

  async notify(channel: string, text: string): Promise<void> {
    await this.sql`select pg_notify(${channel}, ${text})`;
  }
}

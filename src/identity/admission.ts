/**
 * Who a WebSocket (or /metrics) client is, decided once when it connects (docs/teams.md):
 *
 *   the server's own token        the local user (an admin); in the default `token` mode a
 *                                 loopback client must also run as the server's OS user
 *   a user's API token or a JWT   that user (no OS-user check: other people are other OS users)
 *   no token                      the local user when the server takes connections without one
 *                                 (APP_SERVER_AUTH=none and no token configured); else refused
 *
 * A user's token or JWT that does not verify is refused in every mode, `none` included: a client
 * that sends one means to be that user, and being made someone else (the admin) instead would be
 * worse. Any other token sent to a server that needs none is ignored, as it always was.
 */
import type { Socket } from "node:net";
import { isLoopbackAddress, peerUid } from "../transport/auth.js";
import { presentedToken, tokenMatches } from "../transport/websocket.js";
import type { UserDirectory } from "./directory.js";
import { localPrincipal, type Principal } from "./principal.js";

export type Admitted = { ok: true; principal: Principal } | { ok: false; status: 401 | 403; error: string };

export interface AdmissionOptions {
  /** The server's own token; null: none (open loopback for the local user). */
  serverToken: string | null;
  /** A loopback client presenting the server's token must run as this uid (absent: any). */
  peerUid?: number;
  /** Named users and JWTs (absent: only the server's token is known). */
  directory?: UserDirectory;
  /** What to call the local user (the server's OS user). */
  localName: string;
  log: { warn(obj: object, msg: string): void };
}

const MISSING = { ok: false, status: 401, error: "missing or invalid bearer token" } as const;

export class Admission {
  constructor(private readonly opts: AdmissionOptions) {}

  /** Named users become known once the store is open (the transport listens before that). */
  useDirectory(directory: UserDirectory): void {
    this.opts.directory = directory;
  }

  /** Whether connections need a token at all (the DNS-rebinding check applies when not). */
  get tokenRequired(): boolean {
    return this.opts.serverToken !== null;
  }

  async admit(headers: Record<string, string | string[] | undefined>, url: string, socket: Socket): Promise<Admitted> {
    const token = presentedToken(headers, url);
    const { serverToken, directory } = this.opts;
    const named = token !== undefined && directory?.handles(token) === true;
    if (serverToken === null && !named) return { ok: true, principal: localPrincipal("local", this.opts.localName) };
    if (token === undefined) return this.missing(socket);
    if (serverToken !== null && tokenMatches(token, serverToken)) {
      const refused = await this.otherOsUser(socket);
      return refused ?? { ok: true, principal: localPrincipal("local", this.opts.localName) };
    }
    if (named) {
      const who = await directory!.authenticate(token);
      if (who.ok) return who;
      this.opts.log.warn({ component: "auth", remote: socket.remoteAddress, reason: who.reason }, "refused a connection: its token was not accepted");
      return MISSING;
    }
    return this.missing(socket);
  }

  private missing(socket: Socket): Admitted {
    this.opts.log.warn({ component: "ws", remote: socket.remoteAddress }, "rejected a connection without a valid token");
    return MISSING;
  }

  /** A loopback client of another OS user presenting the server's token: refused (403). */
  private async otherOsUser(socket: Socket): Promise<Admitted | null> {
    const expected = this.opts.peerUid;
    if (expected === undefined || !isLoopbackAddress(socket.remoteAddress)) return null;
    const uid = await peerUid(socket);
    if (uid === expected) return null;
    this.opts.log.warn({ component: "http", remote: socket.remoteAddress, peerUid: uid }, "refused a loopback connection of another user");
    return { ok: false, status: 403, error: uid === null ? "the connecting user could not be determined" : "connections from other local users are refused" };
  }
}

/**
 * Every client method's rule in one table (docs/teams.md, "What each role can do"): what it needs
 * of the caller, which thread it acts on, what workspace it would work in, whether it starts a
 * turn, and what it writes to the audit trail. The type requires an entry for every method, so a
 * new method cannot ship without saying how it is scoped (and test/teams/access.e2e.test.ts
 * drives every thread method with another user's thread id).
 *
 *   open     nothing user- or thread-specific (model lists, config, the handshake)
 *   self     the handler scopes to the caller (lists and searches show what it may see)
 *   admin    admins only
 *   create   makes a thread owned by the caller, in the caller's workspace
 *   thread   acts on `threadId`: read (owner, a share, an admin), write (owner, a write share,
 *            an admin) or owner (the owner or an admin); a thread the caller may not see answers
 *            exactly as an unknown one
 */
import path from "node:path";
import type { SandboxMode } from "../protocol/common.js";
import type { ClientRequestMethod, ParamsOf, ResultOf } from "../protocol/methods.js";
import type { SandboxPolicy } from "../protocol/common.js";
import { sandboxUse, type WorkspaceUse } from "./workspace.js";

/** Where a thread works now (the base of overrides). */
export interface ThreadFacts {
  cwd: string;
  sandbox: SandboxMode;
  sandboxPolicy: SandboxPolicy | null;
}

export type ThreadNeed = "read" | "write" | "owner";

/** What an audit row says about an action (who, when and from where are added by the guard). */
export interface AuditFacts {
  action: string;
  threadId?: string | null;
  detail?: Record<string, unknown>;
}

/** `thread`: where the thread works (thread methods only), as it was when the request came. */
type Audit<M extends ClientRequestMethod> = (p: ParamsOf<M>, r: ResultOf<M>, thread?: ThreadFacts) => AuditFacts | null;

/** How a thread's sandbox is named in audit rows: its mode. */
const sandboxOf = (t: ThreadFacts | undefined) => t?.sandbox ?? null;

export type MethodRule<M extends ClientRequestMethod> =
  | { kind: "open" | "self" | "admin"; audit?: Audit<M> }
  | {
      kind: "create";
      /** The new thread's (or command's, or search's) workspace, checked against the caller's roots. */
      workspace?: (p: ParamsOf<M>, base: string) => WorkspaceUse;
      audit?: Audit<M>;
    }
  | {
      kind: "thread";
      need: ThreadNeed | ((p: ParamsOf<M>) => ThreadNeed);
      /** What the method answers for an unknown thread when that is not an error. */
      unknownAnswer?: ResultOf<M>;
      /** The thread's workspace after the request (overrides), checked against its owner's roots. */
      workspace?: (p: ParamsOf<M>, thread: ThreadFacts) => WorkspaceUse;
      /** A fork: a new thread of the caller's, in the caller's workspace. */
      forks?: true;
      /** Starts a turn: the owner's concurrent-turn and tokens-per-day quotas apply. */
      startsTurn?: true;
      audit?: Audit<M>;
    };

const OPEN = { kind: "open" } as const;
const READ = { kind: "thread", need: "read" } as const;
const WRITE = { kind: "thread", need: "write" } as const;

type Overrides = { cwd?: string | null; sandbox?: SandboxMode | null; sandboxPolicy?: SandboxPolicy | null; permissions?: string | null; runtimeWorkspaceRoots?: string[] | null };

/** A resume/fork/turn's workspace: the thread's, changed by what the request overrides. */
function overridden(p: Overrides, t: ThreadFacts): WorkspaceUse {
  const use = sandboxUse(p, t.sandbox);
  const current = t.sandboxPolicy?.type === "workspaceWrite" ? t.sandboxPolicy.writableRoots : [];
  return {
    cwd: p.cwd ?? t.cwd,
    mode: use.mode ?? t.sandbox,
    writableRoots: [...(use.writableRoots ?? []), ...(p.sandboxPolicy || p.permissions || p.sandbox ? [] : current)],
  };
}

const RESUME_OVERRIDES = [
  "model",
  "modelProvider",
  "cwd",
  "approvalPolicy",
  "approvalsReviewer",
  "serviceTier",
  "sandbox",
  "permissions",
  "runtimeWorkspaceRoots",
  "config",
  "baseInstructions",
  "developerInstructions",
  "personality",
] as const;

const threadCreated = (action: string) => (p: { cwd?: string | null; sandbox?: string | null }, r: { thread: { id: string; cwd: string }; sandbox: unknown }) => ({
  action,
  threadId: r.thread.id,
  detail: { cwd: r.thread.cwd, sandbox: r.sandbox },
});

export const METHOD_RULES: { [M in ClientRequestMethod]: MethodRule<M> } = {
  initialize: OPEN,
  "thread/start": {
    kind: "create",
    // A relative cwd is taken from the caller's workspace base, as the handler takes it.
    workspace: (p, base) => ({ cwd: path.resolve(base, p.cwd ?? base), ...sandboxUse(p, "workspace-write") }),
    audit: threadCreated("thread.created"),
  },
  "thread/read": READ,
  "thread/list": { kind: "self" },
  "thread/archive": { ...WRITE, audit: (p) => ({ action: "thread.archived", threadId: p.threadId }) },
  "thread/unarchive": { ...WRITE, audit: (p) => ({ action: "thread.unarchived", threadId: p.threadId }) },
  "thread/name/set": WRITE,
  "thread/loaded/list": { kind: "self" },
  "thread/unsubscribe": { ...READ, unknownAnswer: { status: "notLoaded" } },
  "thread/resume": {
    kind: "thread",
    // Following a thread is reading it; changing its settings is writing.
    need: (p) => (RESUME_OVERRIDES.some((k) => p[k] != null) ? "write" : "read"),
    workspace: overridden,
  },
  "thread/events/list": READ,
  "thread/search": { kind: "self" },
  "thread/fork": {
    kind: "thread",
    need: "read",
    forks: true,
    workspace: overridden,
    audit: (p, r) => ({ ...threadCreated("thread.forked")(p, r), detail: { from: p.threadId, cwd: r.thread.cwd, sandbox: r.sandbox } }),
  },
  "thread/rollback": WRITE,
  "thread/compact/start": { ...WRITE, startsTurn: true, audit: (p) => ({ action: "turn.started", threadId: p.threadId, detail: { kind: "compact" } }) },
  "thread/shellCommand": {
    ...WRITE,
    startsTurn: true,
    audit: (p, _r, t) => ({ action: "command.run", threadId: p.threadId, detail: { command: p.command, cwd: t?.cwd ?? null, sandbox: sandboxOf(t), via: "thread/shellCommand" } }),
  },
  "review/start": { ...WRITE, startsTurn: true, audit: (p, r) => ({ action: "turn.started", threadId: p.threadId, detail: { kind: "review", turnId: r.turn.id } }) },
  "turn/start": {
    ...WRITE,
    startsTurn: true,
    workspace: overridden,
    audit: (p, r, t) => ({ action: "turn.started", threadId: p.threadId, detail: { kind: "agent", turnId: r.turn.id, sandbox: p.sandboxPolicy?.type ?? sandboxOf(t) } }),
  },
  "turn/interrupt": WRITE,
  "turn/steer": WRITE,
  "model/list": OPEN,
  "command/exec": {
    kind: "create",
    workspace: (p, base) => {
      const use = p.sandboxPolicy ? sandboxUse({ sandboxPolicy: p.sandboxPolicy }, "workspace-write") : { mode: "workspace-write" as const };
      return { cwd: path.resolve(base, p.cwd ?? base), ...use };
    },
    audit: (p, r) => ({
      action: "command.run",
      detail: { command: p.command, cwd: p.cwd ?? null, sandbox: p.sandboxPolicy?.type ?? "workspaceWrite", exitCode: r.exitCode, via: "command/exec" },
    }),
  },
  "thread/turns/list": READ,
  "thread/items/list": READ,
  "thread/goal/get": READ,
  "thread/backgroundTerminals/list": READ,
  "account/read": OPEN,
  "modelProvider/list": OPEN,
  "account/bedrock/checkGovCloudRequirements": OPEN,
  "config/read": OPEN,
  "configRequirements/read": OPEN,
  "skills/list": OPEN,
  "hooks/list": OPEN,
  "collaborationMode/list": OPEN,
  "plugin/installed": OPEN,
  "permissionProfile/list": OPEN,
  "mcpServerStatus/list": OPEN,
  // The MCP servers of mcp.json are the server's: reloading them changes every user's tools.
  "config/mcpServer/reload": { kind: "admin", audit: () => ({ action: "config.reloaded", detail: { what: "mcp servers" } }) },
  "mcpServer/tool/call": { ...WRITE, audit: (p) => ({ action: "mcp.tool.called", threadId: p.threadId, detail: { server: p.server, tool: p.tool } }) },
  "mcpServer/resource/read": OPEN,
  fuzzyFileSearch: { kind: "create", workspace: (p) => ({ searchRoots: p.roots }) },
  "fuzzyFileSearch/sessionStart": { kind: "create", workspace: (p) => ({ searchRoots: p.roots }) },
  "fuzzyFileSearch/sessionUpdate": OPEN,
  "fuzzyFileSearch/sessionStop": OPEN,
  "execpolicy/rule/list": { kind: "self" },
  "execpolicy/rule/remove": { kind: "self", audit: (p) => ({ action: "execpolicy.rule.removed", detail: { ruleId: p.id } }) },
  "thread/share": { kind: "thread", need: "owner", audit: (p) => ({ action: "thread.shared", threadId: p.threadId, detail: { user: p.user, access: p.access } }) },
  "audit/list": { kind: "admin" },
  "account/usage/read": { kind: "self" },
};

/**
 * The rule of some method: one of MethodRule<M> for every M. Its functions take that method's
 * params, which a caller holding just a method name can only pass as `never` (the guard passes
 * the request's own params).
 */
export type AnyMethodRule = (typeof METHOD_RULES)[ClientRequestMethod];

/** The rule of a method (for the guard). */
export function ruleOf(method: ClientRequestMethod): AnyMethodRule {
  return METHOD_RULES[method];
}

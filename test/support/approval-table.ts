/**
 * The approval table of docs/approvals.md as data: for every approval policy × sandbox × the
 * shell tool's `sandbox_permissions`, what happens to a command the sandbox does not allow (it
 * writes into the workspace's `.git`, read-only in both sandboxed modes). The end-to-end test
 * (test/approvals-table.e2e.test.ts) runs each cell over a WebSocket and checks that docs/approvals.md
 * holds exactly the row `tableRow` renders for it, so the document cannot drift from what is tested.
 */
export type Policy = "untrusted" | "on-request" | "on-failure" | "never";
export type Sandbox = "read-only" | "workspace-write" | "danger-full-access";

export type Outcome =
  /** No sandbox: runs at once. */
  | "runs"
  /** No sandbox: asked first, then runs. */
  | "asked-runs"
  /** Asked first; runs in the sandbox, denied, then outside it without a second prompt. */
  | "asked-retried"
  /** Asked first (the justification is the reason); runs outside the sandbox. */
  | "asked-escalated"
  /** Runs in the sandbox, denied, asked once, then runs outside it. */
  | "denied-asked-retried"
  /** Runs in the sandbox, denied; the model is told it may ask with require_escalated. */
  | "denied-hint"
  /** Runs in the sandbox, denied; the model is told the policy is never. */
  | "denied-never"
  /** Refused before anything is recorded or run; the model is told why. */
  | "refused";

export interface Cell {
  policy: Policy;
  sandbox: Sandbox;
  escalate: boolean;
  outcome: Outcome;
}

const POLICIES: Policy[] = ["untrusted", "on-request", "on-failure", "never"];
const SANDBOXES: Sandbox[] = ["read-only", "workspace-write", "danger-full-access"];

function outcomeOf(policy: Policy, sandbox: Sandbox, escalate: boolean): Outcome {
  if (policy === "never" && escalate) return "refused";
  if (sandbox === "danger-full-access") return policy === "untrusted" ? "asked-runs" : "runs";
  if (escalate) return "asked-escalated";
  return { untrusted: "asked-retried", "on-request": "denied-hint", "on-failure": "denied-asked-retried", never: "denied-never" }[policy] as Outcome;
}

export const CELLS: Cell[] = POLICIES.flatMap((policy) =>
  SANDBOXES.flatMap((sandbox) => [false, true].map((escalate) => ({ policy, sandbox, escalate, outcome: outcomeOf(policy, sandbox, escalate) }))),
);

/** What each outcome means, per column of the table: asked, where it ran, what the model is told. */
export const OUTCOME_TEXT: Record<Outcome, [asked: string, ran: string, model: string]> = {
  runs: ["no", "once, no sandbox", "the output"],
  "asked-runs": ["once, before it runs", "once, no sandbox", "the output"],
  "asked-retried": ["once, before it runs", "in the sandbox (denied), then outside it — no second prompt", "the output of the run outside"],
  "asked-escalated": ["once, before it runs; reason: the justification", "once, outside the sandbox", "the output"],
  "denied-asked-retried": ["once, after the sandbox denied it", "in the sandbox (denied), then outside it", "the output of the run outside"],
  "denied-hint": ["no", "in the sandbox: denied", 'the denial, and to ask with `"require_escalated"` if it must run outside'],
  "denied-never": ["no", "in the sandbox: denied", 'the denial, and that the policy is "never"'],
  refused: ["no", "not at all (no item)", 'refused: nobody can approve an escalation under "never"'],
};

export function tableRow(c: Cell): string {
  const [asked, ran, model] = OUTCOME_TEXT[c.outcome];
  return `| \`${c.policy}\` | \`${c.sandbox}\` | ${c.escalate ? "`require_escalated`" : "`use_default`"} | ${asked} | ${ran} | ${model} |`;
}

/**
 * One shell call's approvals (approval.ts has the rules): its session key — the command, its
 * working directory and the sandbox — the saved rules that may answer its question, the rule it
 * proposes, and what happens after the sandbox denied it.
 */
import { commandApprovalKey, planCommand, policyMode, sandboxFingerprint, type CommandPlan, type Confinement } from "./approval.js";
import { isReadOnlyCommand } from "./command-parse.js";
import type { ApprovalAnswer, ToolContext } from "./context.js";
import { proposeRule, rulesCover, type RulePattern } from "./execpolicy.js";
import type { RunHandle } from "./host.js";
import { resolveSandbox, type ResolvedSandbox } from "../sandbox/policy.js";
import type { CommandResult } from "../sandbox/runner.js";

/** The arguments of a call that approvals look at. */
export interface ShellCallArgs {
  command: string;
  sandbox_permissions?: "use_default" | "require_escalated";
  justification?: string;
  prefix_rule?: string[];
}

export interface Workdir {
  cwd: string;
  cwdReal: string;
  /** Why the checks object to it (it lies outside the roots), or null. */
  objection: string | null;
}

const isAccept = (a: ApprovalAnswer) => a === "accept" || a === "acceptForSession" || a === "acceptWithExecpolicyAmendment";

export class CommandApprovals {
  /** The rule `acceptWithExecpolicyAmendment` saves (shown as proposedExecpolicyAmendment). */
  proposal: string[] | null = null;
  private saved: string[] | null = null;
  private rules: RulePattern[] | null = null;
  readonly sessionApproved: boolean;

  constructor(
    private readonly ctx: ToolContext,
    private readonly args: ShellCallArgs,
    private readonly where: Workdir,
    /** Whether the model gets hints after a denial (not for the user's own `!command`). */
    private readonly hints: boolean,
  ) {
    // A session approval covers what was shown — the command, its working directory — and the
    // sandbox it was given for; one to run outside the sandbox covers running inside it too.
    const escalated = args.sandbox_permissions === "require_escalated" && ctx.sandbox !== "danger-full-access";
    this.sessionApproved = this.ctx.sessionApprovals.has(this.key(escalated ? "unsandboxed" : "sandboxed")) || this.ctx.sessionApprovals.has(this.key("unsandboxed"));
  }

  private key(confinement: Confinement): string {
    return commandApprovalKey(this.args.command, this.where.cwdReal, confinement === "unsandboxed" ? "unsandboxed" : sandboxFingerprint(this.ctx.sandboxPolicy));
  }

  plan(mode: ReturnType<typeof policyMode>, escalate: boolean, ruleApproved: boolean): CommandPlan {
    return planCommand({
      mode,
      sandboxed: this.ctx.sandbox !== "danger-full-access",
      escalate,
      justification: this.args.justification?.trim() || null,
      readOnly: isReadOnlyCommand(this.args.command),
      workdirObjection: this.where.objection,
      sessionApproved: this.sessionApproved,
      ruleApproved,
      sandboxName: this.ctx.sandbox,
    });
  }

  /** Saved rules are read only when a question is due (they live in the database). */
  private async savedRules(): Promise<RulePattern[]> {
    return (this.rules ??= await this.ctx.execPolicy.patterns());
  }

  async rulesCover(): Promise<boolean> {
    return rulesCover(this.args.command, await this.savedRules());
  }

  /** Chooses the rule to offer; none for a question about the workdir (a rule would not answer it next time). */
  async propose(): Promise<void> {
    this.proposal = this.where.objection === null ? proposeRule(this.args.command, this.args.prefix_rule, await this.savedRules()) : null;
  }

  grantSession(confinement: Confinement): void {
    this.ctx.sessionApprovals.add(this.key(confinement));
  }

  async saveRule(): Promise<void> {
    if (!this.proposal) return;
    await this.ctx.execPolicy.add(this.proposal);
    this.saved = this.proposal;
  }

  savedNote(): string | null {
    if (!this.saved) return null;
    return `The user saved a rule: commands that start with ${JSON.stringify(this.saved)} are approved from now on without asking (one that must run outside the sandbox still needs sandbox_permissions "require_escalated").`;
  }

  /** The thread's sandbox for the first attempt; an accepted workdir outside the writable roots is writable for this command. */
  async confinement(workdirGranted: boolean): Promise<ResolvedSandbox> {
    const sandbox = await resolveSandbox(this.ctx.sandboxPolicy, this.ctx.cwd, { tmpScope: this.ctx.threadId });
    if (workdirGranted && sandbox?.mode === "workspace-write" && !sandbox.writableRoots.includes(this.where.cwdReal))
      return { ...sandbox, writableRoots: [...sandbox.writableRoots, this.where.cwdReal] };
    return sandbox;
  }

  /**
   * After the sandbox denied the first attempt: run again outside it when already approved, ask
   * first when the policy offers that (one question; a saved rule answers it), or tell the model.
   */
  async afterDenial(plan: CommandPlan, host: RunHandle, unsandboxed: () => Promise<CommandResult>): Promise<{ result: CommandResult | { ran: false }; note: string | null; endTurn: boolean }> {
    const again = async () => {
      this.ctx.outputDelta(host.itemId, "\n[running again without the sandbox]\n");
      const result = await unsandboxed();
      if (!result.ran) throw new Error("an unconfined command cannot be refused by the sandbox");
      return { result, note: null, endTurn: false };
    };
    if (plan.afterDenial === "retry") return again();
    if (plan.afterDenial === "report") return { result: { ran: false }, note: this.denialHint(), endTurn: false };
    if (await this.rulesCover()) return again();
    this.proposal = proposeRule(this.args.command, this.args.prefix_rule, await this.savedRules());
    const answer = await host.ask(`the command failed inside the ${this.ctx.sandbox} sandbox; accept to run it again without the sandbox`);
    if (answer === "acceptForSession") this.grantSession("unsandboxed");
    if (answer === "acceptWithExecpolicyAmendment") await this.saveRule();
    if (isAccept(answer)) return again();
    const note =
      answer === "cancel"
        ? "The user cancelled running it again outside the sandbox; the turn is ending."
        : "The user declined to run it again outside the sandbox. Do not retry it unchanged; choose another approach or ask the user.";
    return { result: { ran: false }, note, endTurn: answer === "cancel" };
  }

  /** What the model is told after a denial it may act on (the model's commands under on-request). */
  private denialHint(): string | null {
    if (!this.hints) return null;
    const mode = policyMode(this.ctx.approvalPolicy);
    if (mode === "never")
      return `This looks like the ${this.ctx.sandbox} sandbox stopped the command. The approval policy is "never": it cannot run outside the sandbox, so work within it.`;
    if (mode !== "on-request" || this.args.sandbox_permissions === "require_escalated") return null;
    return `This looks like the ${this.ctx.sandbox} sandbox stopped the command. If it must run outside the sandbox, call shell again with the same command, sandbox_permissions "require_escalated" and a justification (the question the user is asked).`;
  }
}

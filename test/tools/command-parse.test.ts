/** The read-only allow list (conservative) and best-effort command actions. */
import { describe, expect, it } from "vitest";
import { decidePatch, planCommand, policyMode, type CommandFacts } from "../../src/tools/approval.js";
import { isReadOnlyCommand, parseCommandActions, parseCommandLine } from "../../src/tools/command-parse.js";

describe("parseCommandLine", () => {
  it("splits lists and pipes, removing quotes", () => {
    expect(parseCommandLine(`cd src && grep -rn "a b" . | head -n 5; ls 'x y'`)).toEqual({
      segments: [["cd", "src"], ["grep", "-rn", "a b", "."], ["head", "-n", "5"], ["ls", "x y"]],
      separators: ["&&", "|", ";"],
      unsafe: null,
    });
  });

  it("flags what it does not model", () => {
    for (const [cmd, why] of [
      ["echo hi > f", "redirection"],
      ["cat < f", "redirection"],
      ["echo $(id)", "command substitution"],
      ["echo `id`", "command substitution"],
      ['echo "$HOME"', "variable expansion"],
      ["sleep 1 &", "background job"],
      ["(ls)", "subshell"],
      ["{ ls; }", "brace expansion or command group"],
      ["find . -{exec,} rm", "brace expansion or command group"],
      ["rg foo *", "glob at the start of a word"],
      ["ls |", "incomplete command"],
      ["echo 'unterminated", "unterminated quote"],
    ] as const) {
      expect(parseCommandLine(cmd).unsafe, cmd).toBe(why);
    }
    expect(parseCommandLine("grep 'a$' f").unsafe).toBeNull();
    expect(parseCommandLine("ls src/*.ts").unsafe).toBeNull();
  });
});

describe("isReadOnlyCommand", () => {
  it.each([
    "ls",
    "ls -la src",
    "cat README.md",
    "head -n 20 a.txt",
    "tail -5 a.txt",
    "pwd",
    "wc -l a.txt",
    "grep -rn foo src",
    "rg -n 'foo bar' src",
    "find . -name '*.ts' -type f",
    "git status",
    "git diff HEAD~1",
    "git log --oneline -5",
    "git show HEAD",
    "git branch",
    "sed -n 1,20p a.txt",
    "cd src && ls",
    "cat a.txt | grep foo | wc -l",
    "ls # just looking",
  ])("allows %s", (cmd) => {
    expect(isReadOnlyCommand(cmd)).toBe(true);
  });

  it.each([
    "rm -rf /",
    "touch x",
    "find . -delete",
    "find . -name x -exec rm {} ;",
    "find . -execdir rm {} +",
    "ls; rm x",
    "ls && rm x",
    "ls || rm x",
    "cat a | sh",
    "cat a > b",
    "echo $(rm x)",
    "echo `rm x`",
    "git commit -m x",
    "git push",
    "git -c core.pager=evil log",
    "git diff --output=x",
    "git branch -D main",
    "git checkout .",
    "sed -i s/a/b/ f",
    "sed -n 1p f; touch x",
    "sed -n 'w out' f",
    "sort -o out in",
    "rg --pre evil foo",
    "uniq in out",
    "FOO=1 ls",
    "python -c 'print(1)'",
    "npm test",
    "xargs rm",
    "",
  ])("requires approval for %j", (cmd) => {
    expect(isReadOnlyCommand(cmd)).toBe(false);
  });
});

describe("parseCommandActions", () => {
  const cwd = "/ws";
  it("reads, listings and searches", () => {
    expect(parseCommandActions("cat src/a.ts", cwd)).toEqual([{ type: "read", command: "cat src/a.ts", name: "a.ts", path: "/ws/src/a.ts" }]);
    expect(parseCommandActions("head -n 50 a.txt", cwd)).toEqual([{ type: "read", command: "head -n 50 a.txt", name: "a.txt", path: "/ws/a.txt" }]);
    expect(parseCommandActions("sed -n 1,40p lib.rs", cwd)).toEqual([{ type: "read", command: "sed -n 1,40p lib.rs", name: "lib.rs", path: "/ws/lib.rs" }]);
    expect(parseCommandActions("ls -la", cwd)).toEqual([{ type: "listFiles", command: "ls -la", path: null }]);
    expect(parseCommandActions("rg -n 'fn main' src", cwd)).toEqual([{ type: "search", command: "rg -n 'fn main' src", query: "fn main", path: "src" }]);
    expect(parseCommandActions("cd src && grep -n foo a.c | head", cwd)).toEqual([{ type: "search", command: "grep -n foo a.c", query: "foo", path: "a.c" }]);
  });

  it("anything else is one unknown action for the whole command", () => {
    expect(parseCommandActions("npm test", cwd)).toEqual([{ type: "unknown", command: "npm test" }]);
    expect(parseCommandActions("cat a.txt && make", cwd)).toEqual([{ type: "unknown", command: "cat a.txt && make" }]);
    expect(parseCommandActions("cat a > b", cwd)).toEqual([{ type: "unknown", command: "cat a > b" }]);
  });
});

describe("policy decisions", () => {
  it("maps policies to modes", () => {
    expect(policyMode("untrusted")).toBe("untrusted");
    expect(policyMode("on-request")).toBe("on-request");
    expect(policyMode("on-failure")).toBe("on-failure");
    expect(policyMode("never")).toBe("never");
    const granular = (sandbox_approval: boolean) => ({ granular: { sandbox_approval, rules: true, skill_approval: false, request_permissions: false, mcp_elicitations: false } });
    expect(policyMode(granular(true))).toBe("on-request");
    expect(policyMode(granular(false))).toBe("never");
  });

  const facts = (f: Partial<CommandFacts>): CommandFacts => ({
    mode: "on-request",
    sandboxed: true,
    escalate: false,
    justification: null,
    readOnly: false,
    workdirObjection: null,
    sessionApproved: false,
    ruleApproved: false,
    sandboxName: "read-only",
    ...f,
  });

  it("session approvals win over every policy, except that never refuses an escalation", () => {
    for (const mode of ["untrusted", "on-request", "on-failure", "never"] as const) {
      expect(planCommand(facts({ mode, sessionApproved: true, workdirObjection: "no" })).gate).toEqual({ action: "run" });
      expect(decidePatch({ policy: mode, allSessionApproved: true, sandboxObjections: ["no"] })).toEqual({ action: "run" });
    }
    expect(planCommand(facts({ mode: "never", sessionApproved: true, escalate: true })).gate.action).toBe("refuse");
  });

  it("a rule answers questions about the command, never about the workdir", () => {
    expect(planCommand(facts({ escalate: true, ruleApproved: true }))).toEqual({ gate: { action: "run" }, first: "unsandboxed", afterDenial: "report" });
    expect(planCommand(facts({ ruleApproved: true, workdirObjection: "outside" })).gate).toEqual({ action: "ask", reason: "outside" });
    expect(planCommand(facts({ mode: "untrusted", ruleApproved: true }))).toEqual({ gate: { action: "run" }, first: "sandboxed", afterDenial: "retry" });
  });

  it("one prompt per command: what was asked (or approved) retries without asking; only an unasked run asks after a denial", () => {
    expect(planCommand(facts({ mode: "untrusted" })).afterDenial).toBe("retry");
    expect(planCommand(facts({ mode: "untrusted", readOnly: true }))).toEqual({ gate: { action: "run" }, first: "sandboxed", afterDenial: "ask" });
    expect(planCommand(facts({ mode: "on-failure" }))).toEqual({ gate: { action: "run" }, first: "sandboxed", afterDenial: "ask" });
    expect(planCommand(facts({ mode: "on-failure", sessionApproved: true })).afterDenial).toBe("retry");
    expect(planCommand(facts({ mode: "on-request" })).afterDenial).toBe("report");
    expect(planCommand(facts({ mode: "never" })).afterDenial).toBe("report");
  });

  it("escalation: the justification is the reason; without a sandbox there is nothing to escalate", () => {
    expect(planCommand(facts({ escalate: true, justification: "May I?" })).gate).toEqual({ action: "ask", reason: "May I?" });
    expect(planCommand(facts({ escalate: true })).gate).toEqual({ action: "ask", reason: "the command asks to run outside the read-only sandbox" });
    expect(planCommand(facts({ escalate: true, sandboxed: false }))).toEqual({ gate: { action: "run" }, first: "unsandboxed", afterDenial: "report" });
  });
});

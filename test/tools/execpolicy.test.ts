/** Saved approval rules: matching, proposals, the prefixes never proposed; Codex's quoting of the shell invocation. */
import { describe, expect, it } from "vitest";
import { proposeRule, ruleObjection, rulesCover, uncoveredSegments } from "../../src/tools/execpolicy.js";
import { scriptOf, shellInvocation, shellQuote } from "../../src/tools/shell-invocation.js";

describe("rule matching", () => {
  it("every part of the command line must start with a rule's words", () => {
    const rules = [["git", "pull"], ["tee"]];
    expect(rulesCover("git pull | tee out.txt", rules)).toBe(true);
    expect(rulesCover("git pull origin main && tee x", rules)).toBe(true);
    expect(rulesCover("git pull; git push", rules)).toBe(false);
    expect(rulesCover("git", rules)).toBe(false);
    expect(uncoveredSegments("git pull; git push", rules)).toEqual([["git", "push"]]);
  });

  it("quotes are removed before matching, so quoting a word changes nothing", () => {
    expect(rulesCover(`touch "a5"`, [["touch", "a5"]])).toBe(true);
    expect(rulesCover(`'touch' a5 b`, [["touch", "a5"]])).toBe(true);
  });

  it("redirections, substitutions, variables, globs, assignments and background jobs match no rule", () => {
    for (const command of ["touch a5 > ~/.bashrc", "touch a5 $(rm -rf ~)", "touch a5 `id`", "touch $HOME/a5", "touch a5*", "FOO=1 touch a5", "touch a5 &", "(touch a5)"])
      expect(rulesCover(command, [["touch", "a5"]]), command).toBe(false);
  });
});

describe("rule proposals", () => {
  it("proposes the command's words, or the model's prefix_rule when it covers the command and may be saved", () => {
    expect(proposeRule("touch a5", undefined, [])).toEqual(["touch", "a5"]);
    expect(proposeRule("npm run dev -- --port 3000", ["npm", "run", "dev"], [])).toEqual(["npm", "run", "dev"]);
    expect(proposeRule("npm run dev", ["npm", "test"], [])).toEqual(["npm", "run", "dev"]);
    // With saved rules, the one part they do not cover.
    expect(proposeRule("cd web && npm test", undefined, [["cd", "web"]])).toEqual(["npm", "test"]);
    // Two uncovered parts: no single rule would stop the next question, so none is offered.
    expect(proposeRule("cd web && npm test", undefined, [])).toBeNull();
    expect(proposeRule("cd web && npm test", ["cd"], [])).toBeNull();
    expect(proposeRule("touch a5", undefined, [["touch"]])).toBeNull();
    expect(proposeRule("touch a5 > x", undefined, [])).toBeNull();
  });

  it("never a prefix that covers a shell, an interpreter's inline code, a program runner or a whole tool", () => {
    for (const p of [[], ["bash"], ["bash", "-lc"], ["/bin/bash", "-c", "x"], ["sh", "script.sh"], ["zsh"], ["python3"], ["python", "-c", "print(1)"], ["python3", "-"], ["python3", "-m"], ["node", "-e", "1"], ["node", "--eval", "1"], ["perl", "-e", "1"], ["ruby"], ["env"], ["env", "touch"], ["sudo", "make"], ["xargs", "rm"], ["find", "."], ["awk", "{print}"], ["sed", "-i", "s/a/b/", "f"], ["nohup", "x"], ["timeout", "5", "x"], ["git"], ["npm"], ["FOO=1", "x"], ["a\nb"]])
      expect(ruleObjection(p), JSON.stringify(p)).not.toBeNull();
    for (const p of [["touch", "a5"], ["git", "pull"], ["npm", "run", "dev"], ["cargo", "test"], ["python3", "script.py"], ["python3", "-m", "pytest"], ["node", "build.js"], ["./mvnw"], ["ls"]])
      expect(ruleObjection(p), JSON.stringify(p)).toBeNull();
  });
});

describe("the shell invocation as Codex writes it", () => {
  it("quotes like Codex 0.171 (measured against codex app-server)", () => {
    expect(shellInvocation("touch a5", "/bin/bash")).toBe("/bin/bash -lc 'touch a5'");
    expect(shellInvocation("ls", "/bin/bash")).toBe("/bin/bash -lc ls");
    expect(shellInvocation(`echo 'a b' "c" $HOME`, "/bin/bash")).toBe(`/bin/bash -lc "echo 'a b' \\"c\\" "'$HOME'`);
    expect(shellInvocation(`echo "it's" \\\\ !x`, "/bin/bash")).toBe(`/bin/bash -lc "echo \\"it's\\" \\\\\\\\ "'!x'`);
    expect(shellInvocation("echo a\\b c", "/bin/bash")).toBe(`/bin/bash -lc "echo a\\\\b c"`);
    expect(shellInvocation("echo héllo wörld", "/bin/bash")).toBe("/bin/bash -lc 'echo héllo wörld'");
    expect(shellInvocation("^x", "/bin/bash")).toBe("/bin/bash -lc '^x'");
    expect(shellInvocation("a=b,c~d%e#f{g}", "/bin/bash")).toBe("/bin/bash -lc 'a=b,c~d%e#f{g}'");
    expect(shellQuote("")).toBe("''");
  });

  it("scriptOf gives back the script (for display); other text is left as it is", () => {
    for (const script of ["touch a5", "ls", `echo 'a b' "c" $HOME`, "printf 'x\\ty'\nls", "", "a'b\"c\\d$e`f!g"]) expect(scriptOf(shellInvocation(script, "/bin/bash"))).toBe(script);
    expect(scriptOf("npm test")).toBe("npm test");
    expect(scriptOf("/bin/bash -lc 'unterminated")).toBe("/bin/bash -lc 'unterminated");
  });
});

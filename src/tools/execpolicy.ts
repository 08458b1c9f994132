/**
 * Saved approval rules ("exec policy", as Codex calls them): a rule is a command prefix — words,
 * e.g. ["touch", "a5"] — that the user approved with `acceptWithExecpolicyAmendment` ("Yes, and
 * don't ask again for commands that start with …"). Pure logic here; the rules themselves are
 * stored in the database (src/store/execpolicy-store.ts), shared by every process of the server.
 *
 * What a rule does (docs/approvals.md): it answers "yes" to the approval a matching command would
 * have asked for — the model's escalation request, the `untrusted` policy's question, the offer to
 * run again outside the sandbox after a denial. It never widens the sandbox by itself: a command
 * that asked for nothing runs exactly as it would have without the rule, and under `never` a rule
 * changes nothing. (Codex also runs a matching command outside the sandbox when nobody asked.)
 *
 * Matching, as Codex does it: the command line is split at `;`, `&&`, `||`, `|` and newlines, and
 * every part must start with the words of some rule. A line with redirections, substitutions,
 * variables, globs or assignments matches no rule (command-parse.ts ruleSegments).
 */
import path from "node:path";
import { ruleSegments } from "./command-parse.js";

export type RulePattern = readonly string[];

/** Shells: a prefix starting with one of them approves any script. */
const SHELLS = new Set(["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox", "pwsh", "powershell", "powershell.exe", "cmd", "cmd.exe"]);

/** Programs that run another program or a script given in their arguments. */
const RUNNERS = new Set([
  "env", "sudo", "doas", "su", "pkexec", "runuser", "xargs", "nohup", "nice", "ionice", "timeout", "stdbuf", "time",
  "setsid", "chroot", "flock", "watch", "strace", "ltrace", "gdb", "valgrind", "unbuffer", "script", "parallel",
  "exec", "eval", "command", "builtin", "source", ".", "awk", "gawk", "mawk", "nawk", "sed", "find", "osascript",
]);

/** Interpreters: allowed only with a script (or python's `-m module`), never bare or with inline code. */
const INTERPRETERS = /^(python[0-9.]*|pythonw|pypy[0-9]*|py|node|nodejs|deno|bun|perl|ruby|php|lua|luajit|tclsh|wish|rscript|r|julia)$/i;

/** Tools whose one-word prefix would approve every subcommand (Codex bans a bare ["git"]). */
const DISPATCHERS = new Set(["git", "npm", "npx", "pnpm", "yarn", "cargo", "go", "docker", "podman", "kubectl", "make", "uv", "pip", "pip3"]);

/** Why a prefix must never become a rule, or null when it may. */
export function ruleObjection(pattern: RulePattern): string | null {
  if (pattern.length === 0) return "an empty prefix would approve every command";
  if (pattern.some((w) => w === "" || /[\0\n\r]/.test(w))) return "a prefix word is empty or holds a line break";
  const program = path.basename(pattern[0]!);
  if (/^[A-Za-z_][A-Za-z0-9_]*\+?=/.test(pattern[0]!)) return "a prefix cannot start with a variable assignment";
  if (SHELLS.has(program)) return `${program} runs any script: a prefix starting with it would approve everything`;
  if (RUNNERS.has(program)) return `${program} runs other programs: a prefix starting with it would approve everything`;
  if (INTERPRETERS.test(program)) {
    const [, first, second] = pattern;
    if (first === undefined) return `${program} alone would approve any script`;
    if (first === "-m" ? second === undefined : first.startsWith("-")) return `${program} ${first} would approve any code`;
  }
  if (pattern.length === 1 && DISPATCHERS.has(program)) return `${program} alone would approve every ${program} subcommand`;
  return null;
}

const startsWith = (words: readonly string[], prefix: RulePattern) => prefix.length <= words.length && prefix.every((w, i) => words[i] === w);

/** The parts of the command no rule covers; null when the command cannot be matched against rules at all. */
export function uncoveredSegments(command: string, rules: readonly RulePattern[]): string[][] | null {
  const segments = ruleSegments(command);
  if (segments === null) return null;
  return segments.filter((words) => !rules.some((rule) => startsWith(words, rule)));
}

/** True when saved rules approve every part of the command. */
export function rulesCover(command: string, rules: readonly RulePattern[]): boolean {
  return uncoveredSegments(command, rules)?.length === 0;
}

/**
 * The rule to offer with an approval request (`proposedExecpolicyAmendment`), or null. It must,
 * together with the saved rules, cover the whole command (so "don't ask again" holds for this very
 * command) and pass ruleObjection. The model's own `prefix_rule` wins when it qualifies; otherwise
 * the words of the one part no rule covers yet (Codex proposes the command's words, e.g.
 * ["touch", "a5"]).
 */
export function proposeRule(command: string, modelPrefix: RulePattern | undefined, rules: readonly RulePattern[]): string[] | null {
  const uncovered = uncoveredSegments(command, rules);
  if (uncovered === null || uncovered.length === 0) return null;
  const covers = (p: RulePattern) => uncovered.every((words) => startsWith(words, p));
  if (modelPrefix && ruleObjection(modelPrefix) === null && covers(modelPrefix)) return [...modelPrefix];
  if (uncovered.length !== 1) return null;
  const words = uncovered[0]!;
  return ruleObjection(words) === null ? words : null;
}

export const samePattern = (a: RulePattern, b: RulePattern) => a.length === b.length && a.every((w, i) => b[i] === w);

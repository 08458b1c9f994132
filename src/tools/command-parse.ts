/**
 * A deliberately small reading of shell command text, for two jobs:
 *  - deciding whether a command is on the read-only allow list (the `untrusted` policy and the
 *    `read-only` sandbox). This errs on the side of "not read-only": anything we do not fully
 *    understand (redirection, substitution, subshells, variables, background jobs, assignments)
 *    makes the whole command need approval; which programs and flags are allowed is in
 *    read-only-commands.ts;
 *  - best-effort `commandActions` for the commandExecution item (read / listFiles / search).
 */
import path from "node:path";
import type { CommandAction } from "../protocol/items.js";
import { isReadOnlyProgram, type ShellWord } from "./read-only-commands.js";

export interface ParsedCommand {
  /** Simple commands (argv words, quotes removed), split at `;`, `&&`, `||`, `|` and newlines. */
  segments: string[][];
  /** The operator before each segment after the first (`|`, `&&`, `;` …; a newline is `;`). */
  separators: string[];
  /** Why the text is not a plain list of simple commands, if it is not. */
  unsafe: string | null;
}

const OPERATOR_CHARS = new Set([";", "&", "|", "\n"]);

/** Splits command text into simple commands; flags every construct it does not model. */
export function parseCommandLine(command: string): ParsedCommand {
  const { segments, separators, unsafe } = scanCommandLine(command);
  return { segments: segments.map((words) => words.map((w) => w.text)), separators, unsafe };
}

/**
 * parseCommandLine, keeping for each word where its first unquoted glob character is: such a word
 * may expand to several words (or to names starting with `-`), which the allow list must know.
 */
function scanCommandLine(command: string): { segments: ShellWord[][]; separators: string[]; unsafe: string | null } {
  const segments: ShellWord[][] = [];
  const separators: string[] = [];
  let words: ShellWord[] = [];
  let word = "";
  let globAt = -1;
  let inWord = false;
  let pendingOp = ";";
  let unsafe: string | null = null;
  const flag = (why: string) => {
    unsafe ??= why;
  };
  const endWord = () => {
    if (inWord) words.push({ text: word, globAt });
    word = "";
    globAt = -1;
    inWord = false;
  };
  const endSegment = (op: string) => {
    endWord();
    if (words.length === 0) {
      if (op !== ";" || pendingOp !== ";") flag("empty command in a list");
    } else {
      if (segments.length > 0) separators.push(pendingOp);
      segments.push(words);
      pendingOp = op;
    }
    words = [];
  };
  const checkDollar = (next: string | undefined) => {
    if (next !== undefined && /[A-Za-z0-9_{(@*#?$!-]/.test(next)) flag(next === "(" ? "command substitution" : "variable expansion");
  };

  for (let i = 0; i < command.length; i++) {
    const c = command[i];
    if (c === "'") {
      const end = command.indexOf("'", i + 1);
      if (end < 0) {
        flag("unterminated quote");
        word += command.slice(i + 1);
        inWord = true;
        break;
      }
      word += command.slice(i + 1, end);
      inWord = true;
      i = end;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      for (; j < command.length && command[j] !== '"'; j++) {
        const d = command[j];
        if (d === "\\" && j + 1 < command.length && '"\\$`\n'.includes(command[j + 1])) {
          word += command[j + 1];
          j++;
        } else {
          if (d === "`") flag("command substitution");
          if (d === "$") checkDollar(command[j + 1]);
          word += d;
        }
      }
      if (j >= command.length) flag("unterminated quote");
      inWord = true;
      i = j;
      continue;
    }
    if (c === "\\") {
      if (i + 1 < command.length && command[i + 1] !== "\n") word += command[i + 1];
      inWord = inWord || command[i + 1] !== "\n";
      i++;
      continue;
    }
    if (c === " " || c === "\t") {
      endWord();
      continue;
    }
    if (OPERATOR_CHARS.has(c)) {
      const two = command.slice(i, i + 2);
      if (c === "&" && two !== "&&") flag("background job");
      let op = c === "\n" ? ";" : c;
      if (two === "&&" || two === "||" || two === "|&") {
        op = two;
        i++;
      }
      endSegment(op);
      continue;
    }
    if (c === ">" || c === "<") flag("redirection");
    else if (c === "`") flag("command substitution");
    else if (c === "$") checkDollar(command[i + 1]);
    else if (c === "(" || c === ")") flag("subshell");
    else if (c === "{" || c === "}") flag("brace expansion or command group");
    else if (c === "*" || c === "?" || c === "[") {
      if (word === "") flag("glob at the start of a word"); // may expand to a file named like a flag
      if (globAt < 0) globAt = word.length;
    } else if (c === "#" && !inWord) {
      // A comment: the rest of the line is ignored by bash.
      const nl = command.indexOf("\n", i);
      if (nl < 0) break;
      i = nl - 1;
      continue;
    }
    word += c;
    inWord = true;
  }
  endWord();
  if (words.length > 0) {
    if (segments.length > 0) separators.push(pendingOp);
    segments.push(words);
  } else if (pendingOp !== ";") flag("incomplete command");
  return { segments, separators, unsafe };
}

/**
 * The simple commands (words) of a command line that saved approval rules may be checked against,
 * or null when the line is more than a plain list of simple commands. As Codex does, redirections,
 * substitutions, variables, globs and `VAR=value` assignments keep a command away from rules: a
 * rule for `touch a5` must not also approve `touch a5 > ~/.bashrc` or `FOO=x touch a5`.
 */
export function ruleSegments(command: string): string[][] | null {
  const parsed = scanCommandLine(command);
  if (parsed.unsafe !== null || parsed.segments.length === 0) return null;
  for (const words of parsed.segments) {
    if (words.some((w) => w.globAt >= 0)) return null;
    if (/^[A-Za-z_][A-Za-z0-9_]*\+?=/.test(words[0]!.text)) return null;
  }
  return parsed.segments.map((words) => words.map((w) => w.text));
}

/** True when every part of the command is on the read-only allow list and nothing else happens. */
export function isReadOnlyCommand(command: string): boolean {
  const parsed = scanCommandLine(command);
  if (parsed.unsafe !== null || parsed.segments.length === 0) return false;
  // `VAR=value cmd` is not on the list either: no program is named like an assignment.
  return parsed.segments.every(isReadOnlyProgram);
}

/** Commands that only filter a pipe when given no file. */
const FILTERS = new Set(["head", "tail", "wc", "sort", "uniq", "cut", "tr", "nl", "grep", "rg", "sed", "awk", "less", "more", "cat", "xargs"]);

const nonFlags = (args: string[]) => args.filter((a) => !a.startsWith("-"));

function actionFor(words: string[], cwd: string, piped: boolean): CommandAction | null | "skip" {
  const [cmd, ...args] = words;
  const text = words.map(quoteForDisplay).join(" ");
  const abs = (p: string) => path.resolve(cwd, p);
  switch (cmd) {
    case "cd":
    case "true":
    case "echo":
      return "skip";
    case "cat":
    case "head":
    case "tail":
    case "less":
    case "more": {
      const files = nonFlagsSkipping(args, cmd === "head" || cmd === "tail" ? ["-n", "-c"] : []);
      if (files.length === 0) return piped ? "skip" : null;
      if (files.length !== 1) return null;
      return { type: "read", command: text, name: path.basename(files[0]), path: abs(files[0]) };
    }
    case "sed": {
      if (args[0] !== "-n" || args.length < 2) return null;
      const files = args.slice(2);
      if (files.length === 0) return piped ? "skip" : null;
      if (files.length !== 1) return null;
      return { type: "read", command: text, name: path.basename(files[0]), path: abs(files[0]) };
    }
    case "ls":
    case "tree": {
      const dirs = nonFlags(args);
      return { type: "listFiles", command: text, path: dirs.length === 1 ? dirs[0] : null };
    }
    case "grep":
    case "egrep":
    case "fgrep":
    case "rg": {
      const rest = nonFlagsSkipping(args, ["-e", "-f", "-g", "--glob", "-t", "--type", "-A", "-B", "-C", "-m", "--max-count", "-T", "--type-not"]);
      const explicit = args.indexOf("-e");
      const query = explicit >= 0 ? (args[explicit + 1] ?? null) : (rest.shift() ?? null);
      if (query === null && piped) return "skip";
      if (piped && rest.length === 0) return "skip";
      return { type: "search", command: text, query, path: rest.length === 1 ? rest[0] : null };
    }
    case "find":
    case "fd": {
      if (cmd === "find") {
        const nameAt = args.findIndex((a) => a === "-name" || a === "-iname" || a === "-path");
        const query = nameAt >= 0 ? (args[nameAt + 1] ?? null) : null;
        const start = args[0] !== undefined && !args[0].startsWith("-") ? args[0] : null;
        if (query === null) return { type: "listFiles", command: text, path: start };
        return { type: "search", command: text, query, path: start };
      }
      const rest = nonFlags(args);
      return { type: "search", command: text, query: rest[0] ?? null, path: rest[1] ?? null };
    }
    default:
      if (piped && FILTERS.has(cmd)) return "skip";
      return null;
  }
}

/** Non-flag words, skipping the values of the given flags that take one. */
function nonFlagsSkipping(args: string[], flagsWithValue: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (flagsWithValue.includes(a)) {
      i++;
      continue;
    }
    if (a.startsWith("-")) continue;
    out.push(a);
  }
  return out;
}

function quoteForDisplay(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * Best-effort `commandActions`: one action per part of the command; if any part is not
 * understood, the whole command is one `unknown` action (as Codex does).
 */
export function parseCommandActions(command: string, cwd: string): CommandAction[] {
  const unknown: CommandAction[] = [{ type: "unknown", command }];
  const parsed = parseCommandLine(command);
  if (parsed.unsafe !== null || parsed.segments.length === 0) return unknown;
  const actions: CommandAction[] = [];
  parsed.segments.forEach((words, i) => {
    const piped = i > 0 && (parsed.separators[i - 1] === "|" || parsed.separators[i - 1] === "|&");
    const a = actionFor(words, cwd, piped);
    if (a === "skip") return;
    actions.push(a ?? { type: "unknown", command: words.map(quoteForDisplay).join(" ") });
  });
  if (actions.length === 0 || actions.some((a) => a.type === "unknown")) return unknown;
  return actions;
}

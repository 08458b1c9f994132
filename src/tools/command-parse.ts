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
function scanCommandLine(command: string): ScannedCommand {
  return new CommandScanner(command).scan();
}

interface ScannedCommand {
  segments: ShellWord[][];
  separators: string[];
  unsafe: string | null;
}

/** One left-to-right pass over command text: words into simple commands, and the first reason it is unsafe. */
class CommandScanner {
  private readonly segments: ShellWord[][] = [];
  private readonly separators: string[] = [];
  private unsafe: string | null = null;
  private words: ShellWord[] = [];
  private word = "";
  private globAt = -1;
  private inWord = false;
  private pendingOp = ";";

  constructor(private readonly command: string) {}

  scan(): ScannedCommand {
    for (let i = 0; i < this.command.length; i++) {
      const last = this.step(i);
      if (last === null) break;
      i = last;
    }
    this.endWord();
    if (this.words.length > 0) {
      if (this.segments.length > 0) this.separators.push(this.pendingOp);
      this.segments.push(this.words);
    } else if (this.pendingOp !== ";") this.flag("incomplete command");
    return { segments: this.segments, separators: this.separators, unsafe: this.unsafe };
  }

  /** Reads what starts at `i`; the index of the last character it took, or null when nothing after it counts. */
  private step(i: number): number | null {
    const c = this.command[i]!;
    if (c === "'") return this.singleQuoted(i);
    if (c === '"') return this.doubleQuoted(i);
    if (c === "\\") return this.escaped(i);
    if (c === " " || c === "\t") {
      this.endWord();
      return i;
    }
    if (OPERATOR_CHARS.has(c)) return this.operator(i);
    if (c === "#" && !this.inWord) {
      // A comment: the rest of the line is ignored by bash.
      const nl = this.command.indexOf("\n", i);
      return nl < 0 ? null : nl - 1;
    }
    this.plain(i);
    return i;
  }

  private singleQuoted(i: number): number | null {
    const end = this.command.indexOf("'", i + 1);
    this.inWord = true;
    if (end < 0) {
      this.flag("unterminated quote");
      this.word += this.command.slice(i + 1);
      return null;
    }
    this.word += this.command.slice(i + 1, end);
    return end;
  }

  private doubleQuoted(i: number): number {
    const command = this.command;
    let j = i + 1;
    for (; j < command.length && command[j] !== '"'; j++) {
      const d = command[j]!;
      if (d === "\\" && j + 1 < command.length && '"\\$`\n'.includes(command[j + 1]!)) {
        this.word += command[j + 1];
        j++;
      } else {
        if (d === "`") this.flag("command substitution");
        if (d === "$") this.checkDollar(command[j + 1]);
        this.word += d;
      }
    }
    if (j >= command.length) this.flag("unterminated quote");
    this.inWord = true;
    return j;
  }

  private escaped(i: number): number {
    const next = this.command[i + 1];
    if (i + 1 < this.command.length && next !== "\n") this.word += next;
    this.inWord = this.inWord || next !== "\n";
    return i + 1;
  }

  private operator(i: number): number {
    const c = this.command[i]!;
    const two = this.command.slice(i, i + 2);
    if (c === "&" && two !== "&&") this.flag("background job");
    let op = c === "\n" ? ";" : c;
    if (two === "&&" || two === "||" || two === "|&") {
      op = two;
      i++;
    }
    this.endSegment(op);
    return i;
  }

  /** Any other character: part of the word, flagging the constructs not modelled. */
  private plain(i: number): void {
    const c = this.command[i]!;
    if (c === ">" || c === "<") this.flag("redirection");
    else if (c === "`") this.flag("command substitution");
    else if (c === "$") this.checkDollar(this.command[i + 1]);
    else if (c === "(" || c === ")") this.flag("subshell");
    else if (c === "{" || c === "}") this.flag("brace expansion or command group");
    else if (c === "*" || c === "?" || c === "[") {
      if (this.word === "") this.flag("glob at the start of a word"); // may expand to a file named like a flag
      if (this.globAt < 0) this.globAt = this.word.length;
    }
    this.word += c;
    this.inWord = true;
  }

  private flag(why: string): void {
    this.unsafe ??= why;
  }

  private checkDollar(next: string | undefined): void {
    if (next !== undefined && /[A-Za-z0-9_{(@*#?$!-]/.test(next)) this.flag(next === "(" ? "command substitution" : "variable expansion");
  }

  private endWord(): void {
    if (this.inWord) this.words.push({ text: this.word, globAt: this.globAt });
    this.word = "";
    this.globAt = -1;
    this.inWord = false;
  }

  private endSegment(op: string): void {
    this.endWord();
    if (this.words.length === 0) {
      if (op !== ";" || this.pendingOp !== ";") this.flag("empty command in a list");
    } else {
      if (this.segments.length > 0) this.separators.push(this.pendingOp);
      this.segments.push(this.words);
      this.pendingOp = op;
    }
    this.words = [];
  }
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

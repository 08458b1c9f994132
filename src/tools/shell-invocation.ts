/**
 * The shell invocation a command runs as, written the way Codex writes it in `commandExecution`
 * items and approval requests (`/bin/bash -lc 'touch a5'`), and back to the script for display.
 *
 * Quoting follows the shlex crate Codex joins argv with: a word of only safe characters stays
 * bare; otherwise it is split into runs quoted the cheapest way — single quotes unless the run
 * holds `'` or `\`, else double quotes (escaping `"`, `\`, `$`, `` ` ``), and `$`, `` ` ``, `!`
 * always in single quotes — so `echo 'a b' $HOME` becomes `"echo 'a b' "'$HOME'`.
 */
import { existsSync } from "node:fs";

/** The bash commands run with: /bin/bash where it exists (as Codex reports it), else `bash` on PATH. */
export const BASH = existsSync("/bin/bash") ? "/bin/bash" : "bash";

const SAFE = /^[A-Za-z0-9+\-./:@\]_]$/;
const UNQUOTED = 1;
const SINGLE = 2;
const DOUBLE = 4;

/** The longest run starting at `from` that one quoting style can hold, and the best style for it. */
function nextRun(s: string, from: number): { end: number; style: number } {
  let ok = UNQUOTED | SINGLE | DOUBLE;
  let i = from;
  if (s[i] === "^") {
    // zsh reads a leading ^ as history expansion: single-quote it.
    ok = SINGLE;
    i++;
  }
  for (; i < s.length; i++) {
    const c = s[i]!;
    let next = ok;
    if (!SAFE.test(c)) next &= ~UNQUOTED;
    if (c === "'" || c === "\\") next &= ~SINGLE;
    if (c === "$" || c === "`" || c === "!") next &= ~DOUBLE;
    if (next === 0) break;
    ok = next;
  }
  return { end: i, style: ok & UNQUOTED ? UNQUOTED : ok & SINGLE ? SINGLE : DOUBLE };
}

/** One shell word, quoted as Codex (shlex) quotes it. */
export function shellQuote(word: string): string {
  if (word === "") return "''";
  let out = "";
  for (let i = 0; i < word.length; ) {
    const { end, style } = nextRun(word, i);
    const run = word.slice(i, end);
    if (style === UNQUOTED && i === 0 && end === word.length) return word;
    if (style === UNQUOTED) out += run;
    else if (style === SINGLE) out += `'${run}'`;
    else out += `"${run.replace(/["\\$`]/g, (c) => `\\${c}`)}"`;
    i = end;
  }
  return out;
}

/** `/bin/bash -lc '<script>'`: what a `commandExecution` item's `command` says. */
export function shellInvocation(script: string, shell = BASH): string {
  return [shell, "-lc", script].map(shellQuote).join(" ");
}

/** Splits a command line quoted by shellQuote back into words; null when it is not one. */
function splitQuoted(line: string): string[] | null {
  const words: string[] = [];
  let word: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === " ") {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) return null;
      word = (word ?? "") + line.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      let text = "";
      for (i++; i < line.length && line[i] !== '"'; i++) text += line[i] === "\\" && i + 1 < line.length ? line[++i] : line[i];
      if (i >= line.length) return null;
      word = (word ?? "") + text;
    } else word = (word ?? "") + (c === "\\" && i + 1 < line.length ? line[++i] : c);
  }
  if (word !== null) words.push(word);
  return words;
}

/** The script of a `<shell> -lc <script>` invocation (what a person typed), else the text unchanged. */
export function scriptOf(command: string): string {
  const words = splitQuoted(command);
  if (words?.length === 3 && /(^|\/)(ba|z|da)?sh$/.test(words[0]!) && words[1] === "-lc") return words[2]!;
  return command;
}

// The script a person typed, from a commandExecution's `command`: the server (like Codex) reports
// the shell invocation it ran, `/bin/bash -lc '<script>'`, quoted as Codex quotes it
// (src/tools/shell-invocation.ts); anything else is shown as it is.

/** Splits a line of single-quoted, double-quoted and bare words; null when a quote is unterminated. */
function splitQuoted(line) {
  const words = [];
  let word = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
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

export function scriptOf(command) {
  const words = splitQuoted(command ?? "");
  if (words?.length === 3 && /(^|\/)(ba|z|da)?sh$/.test(words[0]) && words[1] === "-lc") return words[2];
  return command;
}

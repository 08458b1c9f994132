/**
 * The README's commands: every line of its ```sh blocks (a trailing `\` joins the next line;
 * comments and blank lines dropped). A test that runs one takes it from here with readmeCommand
 * and a string literal, so the command it runs is the README's own, and a README edit that changes
 * it fails that test instead of leaving it testing something else. test/readme-commands.test.ts
 * checks that every command is taken by some test (or run by .ci/run).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./process.js";

export function readmeCommands(text = readFileSync(path.join(REPO_ROOT, "README.md"), "utf8")): string[] {
  const commands: string[] = [];
  for (const [, block] of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const joined = block!.replace(/\\\n\s*/g, "");
    for (const line of joined.split("\n")) {
      // A comment starts at a # preceded by a space (none of the commands quote one).
      const command = line.replace(/(^|\s)#.*$/, "").trim();
      if (command) commands.push(command);
    }
  }
  return commands;
}

/** `command` exactly as the README has it; throws when the README has no such command. */
export function readmeCommand(command: string): string {
  if (!readmeCommands().includes(command)) throw new Error(`the README has no command \`${command}\` any more: update this test to what it says now`);
  return command;
}

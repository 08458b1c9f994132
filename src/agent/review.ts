/**
 * What a review turn asks the model (review/start): what to look at for each target, and how to
 * report. The `hint` is what clients show ("Code review started: current changes").
 */
import type { ReviewTarget } from "../protocol/review.js";

const RUBRIC = [
  "You are reviewing code changes, not writing them: do not modify any file, and run only commands that read (git, ls, cat, grep).",
  "Report the problems a careful reviewer would block or flag: bugs, wrong behaviour in edge cases, security and data-loss risks, races, broken or missing tests, misleading names or comments.",
  "Skip style nits and anything you are not reasonably sure of.",
  "For each finding give a priority ([P0] must fix before merging … [P3] minor), the file and line, what is wrong and why it matters, in a few sentences.",
  "Order findings by priority. End with one line: the overall verdict (whether the change is correct as it stands).",
  "If you find nothing worth reporting, say so plainly.",
].join("\n");

export interface ReviewRequest {
  /** What is reviewed, for clients (the enteredReviewMode item's `review`). */
  hint: string;
  /** The user message the model gets. */
  prompt: string;
}

export function reviewRequest(target: ReviewTarget): ReviewRequest {
  switch (target.type) {
    case "uncommittedChanges":
      return {
        hint: "current changes",
        prompt: "Review the uncommitted changes of this repository: staged, unstaged and untracked files (`git status`, `git diff HEAD`, and read each untracked file).",
      };
    case "baseBranch":
      return {
        hint: `changes against '${target.branch}'`,
        prompt: `Review the changes of the current branch against the base branch '${target.branch}': find where they diverged with \`git merge-base HEAD ${shellWord(target.branch)}\` and review \`git diff\` from that commit to the working tree.`,
      };
    case "commit": {
      const short = target.sha.slice(0, 7);
      const title = target.title?.trim();
      return {
        hint: title ? `commit ${short}: ${title}` : `commit ${short}`,
        prompt: `Review the changes introduced by commit ${target.sha}${title ? ` ("${title}")` : ""}: \`git show ${shellWord(target.sha)}\`.`,
      };
    }
    case "custom":
      return { hint: target.instructions.trim(), prompt: target.instructions.trim() };
  }
}

/** The full user message: the target's instructions, then the rubric. */
export function reviewMessage(request: ReviewRequest): string {
  return `${request.prompt}\n\n${RUBRIC}`;
}

/** A branch name or sha as one shell word (they come from the client). */
function shellWord(s: string): string {
  return /^[A-Za-z0-9_./@^~:-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

// Copying to the clipboard: code blocks (their Copy button), thread ids. The Clipboard API needs a
// secure context (https, or http on localhost); a page served over plain http from another host
// falls back to a selected, off-screen textarea and execCommand("copy").

import { h } from "./dom.js";

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = h("textarea", { class: "offscreen", readOnly: true });
    area.value = text;
    document.body.append(area);
    area.select();
    let ok = false;
    try {
      ok = document.execCommand("copy");
    } catch {
      ok = false;
    }
    area.remove();
    return ok;
  }
}

/** Copies, then says so on the button for a moment (data-copied, and the label when given). */
export async function copyWithFeedback(button, text, copiedLabel) {
  const ok = await copyText(text);
  const label = button.textContent;
  button.dataset.copied = ok ? "yes" : "no";
  if (copiedLabel) button.textContent = ok ? copiedLabel : "Copy failed";
  const shown = button.textContent;
  setTimeout(() => {
    delete button.dataset.copied;
    // Unless the button was given a new label meanwhile (the id chip of another thread).
    if (copiedLabel && button.textContent === shown) button.textContent = label;
  }, 1500);
  return ok;
}

/** One listener for every code block's Copy button (they are re-rendered while text streams). */
export function handleCodeCopyClicks(container) {
  container.addEventListener("click", (e) => {
    const button = e.target instanceof Element ? e.target.closest(".copy-code") : null;
    if (!button || button.dataset.copied) return;
    const code = button.closest(".code-block")?.querySelector("pre code");
    if (code) void copyWithFeedback(button, code.textContent, "Copied");
  });
}

// Keyboard shortcuts (listed in the help popover, index.html): Enter sends and Shift+Enter adds a
// line (in the message field), Esc stops the running turn, Ctrl/⌘+K opens a new thread, ? the help.

import { $ } from "./dom.js";
import { state } from "./state.js";
import { newDraft } from "./threads.js";
import { interrupt, send } from "./turns.js";
import { renaming } from "./thread-actions.js";

const typing = (el) => el instanceof HTMLElement && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));

export function initShortcuts() {
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void send();
    }
  });

  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && !e.altKey && !e.shiftKey && e.key.toLowerCase() === "k") {
      e.preventDefault();
      void newDraft();
      return;
    }
    if (e.key === "Escape") {
      // Esc first closes what is open (the browser closes the help popover itself; the rename
      // field cancels on its own), and only then stops the turn.
      if ($("help").matches(":popover-open") || renaming() || e.defaultPrevented) return;
      if (document.body.classList.contains("sidebar-open")) {
        document.body.classList.remove("sidebar-open");
        $("toggle-sidebar").setAttribute("aria-expanded", "false");
        return;
      }
      if (state.activeTurnId) {
        e.preventDefault();
        void interrupt();
      }
      return;
    }
    if (e.key === "?" && !typing(e.target) && !e.ctrlKey && !e.metaKey && !e.altKey) {
      e.preventDefault();
      $("help").togglePopover();
    }
  });
}

// Light or dark: the page follows the system (prefers-color-scheme, through the stylesheet's
// light-dark() colours) until the toggle pins a theme; the choice is remembered in localStorage.
// The toggle cycles system → light → dark → system.

import { $ } from "./dom.js";

export const THEME_KEY = "agent-app-server.theme";
const NEXT = { system: "light", light: "dark", dark: "system" };
const LOOK = {
  system: ["◐", "Theme: as the system's — click for light"],
  light: ["☀", "Theme: light — click for dark"],
  dark: ["☾", "Theme: dark — click to follow the system"],
};

function storedChoice() {
  try {
    const v = localStorage.getItem(THEME_KEY);
    return v in NEXT ? v : "system";
  } catch {
    return "system"; // storage disabled: the system's theme
  }
}

function apply(choice) {
  if (choice === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = choice;
  const button = $("theme-toggle");
  button.dataset.themeChoice = choice;
  button.textContent = LOOK[choice][0];
  button.title = LOOK[choice][1];
}

export function initTheme() {
  apply(storedChoice());
  $("theme-toggle").addEventListener("click", () => {
    const choice = NEXT[$("theme-toggle").dataset.themeChoice] ?? "system";
    apply(choice);
    try {
      if (choice === "system") localStorage.removeItem(THEME_KEY);
      else localStorage.setItem(THEME_KEY, choice);
    } catch {
      // not remembered, still applied
    }
  });
}

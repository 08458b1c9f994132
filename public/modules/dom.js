// Small DOM helpers shared by the playground's modules.

export const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/**
 * Creates an element. `props`: class, dataset (object), hidden, title, type, disabled, open,
 * on<event> handlers. Children: nodes, or strings (added as text nodes), null/false skipped.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key in el) el[key] = value;
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

export function relativeTime(unixSeconds) {
  if (!unixSeconds) return "";
  const s = Math.round(Date.now() / 1000 - unixSeconds);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(unixSeconds * 1000).toLocaleDateString();
}

export function shortId(id) {
  return id ? id.slice(-8) : "";
}

export function truncate(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

export function scrollToEnd(force = false) {
  const c = $("conversation");
  const nearEnd = c.scrollHeight - c.scrollTop - c.clientHeight < 120;
  if (force || nearEnd) c.scrollTop = c.scrollHeight;
}

export function showBanner(text, actionLabel, action) {
  $("banner").hidden = false;
  $("banner-text").textContent = text;
  const button = $("banner-action");
  button.hidden = !actionLabel;
  button.textContent = actionLabel ?? "";
  button.onclick = action
    ? () => {
        hideBanner();
        void action();
      }
    : null;
}

export function hideBanner() {
  $("banner").hidden = true;
}

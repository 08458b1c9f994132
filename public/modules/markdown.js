// Agent text as Markdown, safely: markdown-it (served by the server from its node_modules at
// /vendor/markdown-it.mjs, version pinned in package.json) with raw HTML off — any HTML in the
// text is shown as text — images off (nothing is loaded from elsewhere), and only http(s)/mailto
// links, which open in a new tab without a referrer. What markdown-it emits is the only HTML the
// page ever inserts; everything else goes in as text. Without the module: plain text.
//
// Fenced code gets a head with its language and a Copy button (clipboard.js handles the clicks),
// and, when the fence names a language highlight.js knows, syntax colours: highlight.js (its
// browser build of the common languages, /vendor/highlight.mjs) escapes the code itself and
// returns it wrapped in <span class="hljs-…">, coloured by style.css.

let md = null;
let hljs = null;
try {
  ({ default: hljs } = await import("../vendor/highlight.mjs"));
} catch {
  hljs = null; // not installed: code blocks stay uncoloured
}

try {
  const { default: markdownit } = await import("../vendor/markdown-it.mjs");
  md = markdownit({
    html: false,
    linkify: true,
    breaks: false,
    typographer: false,
    // "" tells markdown-it to escape the code itself (unknown or no language).
    highlight: (code, lang) => (hljs && lang && hljs.getLanguage(lang) ? hljs.highlight(code, { language: lang, ignoreIllegals: true }).value : ""),
  });
  md.disable(["image"]);
  const safeLink = /^(https?:|mailto:)/i;
  const defaultValidate = md.validateLink;
  md.validateLink = (url) => defaultValidate(url) && safeLink.test(url.trim());
  md.renderer.rules.link_open = (tokens, idx, options, _env, self) => {
    tokens[idx].attrSet("target", "_blank");
    tokens[idx].attrSet("rel", "noopener noreferrer");
    return self.renderToken(tokens, idx, options);
  };
  const fence = md.renderer.rules.fence;
  md.renderer.rules.fence = (tokens, idx, options, env, self) => {
    const lang = tokens[idx].info.trim().split(/\s+/)[0] ?? "";
    const head = `<div class="code-head"><span class="code-lang">${md.utils.escapeHtml(lang || "text")}</span><button type="button" class="copy-code" title="Copy the code">Copy</button></div>`;
    return `<div class="code-block">${head}${fence(tokens, idx, options, env, self)}</div>\n`;
  };
} catch {
  md = null;
}

/** Renders `text` into `el` (class "markdown" when rendered, plain text otherwise). */
export function renderMarkdown(el, text) {
  if (!md) {
    el.textContent = text;
    return;
  }
  el.classList.add("markdown");
  el.innerHTML = md.render(text);
}

/**
 * A streaming Markdown view: text grows by deltas and is rendered at most every 50 ms
 * (re-parsing the whole message on every delta would be quadratic on long answers). A timer, not
 * requestAnimationFrame, so that a tab in the background still keeps up.
 */
export function markdownView(el) {
  let text = "";
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    renderMarkdown(el, text);
  };
  return {
    get text() {
      return text;
    },
    set(value) {
      text = value;
      flush();
    },
    append(delta) {
      text += delta;
      if (scheduled) return;
      scheduled = true;
      setTimeout(flush, 50);
    },
  };
}

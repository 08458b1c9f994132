// Agent text as Markdown, safely: markdown-it (served by the server from its node_modules at
// /vendor/markdown-it.mjs, version pinned in package.json) with raw HTML off — any HTML in the
// text is shown as text — images off (nothing is loaded from elsewhere), and only http(s)/mailto
// links, which open in a new tab without a referrer. What markdown-it emits is the only HTML the
// page ever inserts; everything else goes in as text. Without the module: plain text.

let md = null;
try {
  const { default: markdownit } = await import("../vendor/markdown-it.mjs");
  md = markdownit({ html: false, linkify: true, breaks: false, typographer: false });
  md.disable(["image"]);
  const safeLink = /^(https?:|mailto:)/i;
  const defaultValidate = md.validateLink;
  md.validateLink = (url) => defaultValidate(url) && safeLink.test(url.trim());
  md.renderer.rules.link_open = (tokens, idx, options, _env, self) => {
    tokens[idx].attrSet("target", "_blank");
    tokens[idx].attrSet("rel", "noopener noreferrer");
    return self.renderToken(tokens, idx, options);
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

/**
 * `app-server app-server [flags]`: the command line of Codex's `codex app-server`, so a client
 * that spawns Codex (the IDE extension's "Codex executable" setting) can spawn this server
 * instead. It translates Codex's flags into `serve` arguments: stdio is the default transport,
 * `--ws-token-file` is our `--auth-token-file` (the same capability-token semantics), `-c
 * model=…` / `-c model_provider=…` set the defaults. Flags Codex has that mean nothing here are
 * accepted with a warning on stderr, never fatal, so a newer client's extra flag cannot stop it.
 */

/** Codex flags that take a value and that we accept but do not act on. */
const IGNORED_WITH_VALUE = new Set([
  "--enable",
  "--disable",
  "--startup-client-info",
  "--cloud-skills-snapshot",
  "--code-mode-host",
  "--ws-auth",
  "--ws-token-sha256",
  "--ws-shared-secret-file",
  "--ws-issuer",
  "--ws-audience",
  "--ws-max-clock-skew-seconds",
]);
const IGNORED_SWITCHES = new Set(["--strict-config", "--analytics-default-enabled", "--startup-sign-out"]);
/** Our own serve flags, passed through unchanged (all take a value except the switch). */
const SERVE_WITH_VALUE = new Set([
  "--database-url",
  "--home",
  "--model-provider",
  "--model",
  "--max-frame-bytes",
  "--auth-token-file",
  "--allowed-origin",
  "--max-connections",
  "--max-concurrent-turns",
  "--bwrap",
  "--command-env",
  "--mcp-config",
]);
const SERVE_SWITCHES = new Set(["--insecure-no-auth"]);

export type Translation = { serve: string[] } | { generateSchemaOut: string } | { exit: number };

/** A TOML-ish value from `-c key=value`: a quoted string loses its quotes; anything else is raw. */
function tomlString(v: string): string {
  const m = /^"(.*)"$|^'(.*)'$/.exec(v.trim());
  return m ? (m[1] ?? m[2] ?? "") : v.trim();
}

export function translateCodexArgs(args: string[], warn: (line: string) => void): Translation {
  const serve: string[] = [];
  let listen = "stdio://";
  for (let i = 0; i < args.length; i++) {
    const raw = args[i]!;
    const eq = raw.startsWith("--") ? raw.indexOf("=") : -1;
    const flag = eq > 0 ? raw.slice(0, eq) : raw;
    const value = (): string | undefined => (eq > 0 ? raw.slice(eq + 1) : args[++i]);
    if (flag === "--help" || flag === "-h") {
      process.stdout.write(HELP);
      return { exit: 0 };
    }
    if (i === 0 && (flag === "generate-json-schema" || flag === "generate-ts" || flag === "daemon" || flag === "proxy")) {
      if (flag === "generate-json-schema") {
        const out = args.indexOf("--out");
        if (out < 0 || !args[out + 1]) return usage(warn, "generate-json-schema needs --out DIR");
        return { generateSchemaOut: args[out + 1]! };
      }
      return usage(warn, `codex app-server ${flag} is not supported by this server`);
    }
    if (flag === "--listen") {
      const v = value();
      if (!v) return usage(warn, "--listen needs a URL");
      if (v.startsWith("unix:") || v === "off") return usage(warn, `--listen ${v} is not supported here (use stdio:// or ws://HOST:PORT)`);
      listen = v;
    } else if (flag === "--stdio") listen = "stdio://";
    else if (flag === "--ws-token-file") {
      const v = value();
      if (!v) return usage(warn, "--ws-token-file needs a path");
      serve.push("--auth-token-file", v);
    } else if (flag === "-c" || flag === "--config") {
      const v = value() ?? "";
      const at = v.indexOf("=");
      const key = at > 0 ? v.slice(0, at).trim() : v;
      if (key === "model") serve.push("--model", tomlString(v.slice(at + 1)));
      else if (key === "model_provider") serve.push("--model-provider", tomlString(v.slice(at + 1)));
      else warn(`app-server: ignoring Codex config override ${key} (not used by this server)`);
    } else if (flag === "--print-startup-config") {
      process.stdout.write(JSON.stringify({ listen, args: serve }) + "\n");
      return { exit: 0 };
    } else if (IGNORED_WITH_VALUE.has(flag)) {
      value();
      warn(`app-server: ignoring Codex flag ${flag} (not used by this server)`);
    } else if (IGNORED_SWITCHES.has(flag)) warn(`app-server: ignoring Codex flag ${flag} (not used by this server)`);
    else if (SERVE_WITH_VALUE.has(flag)) {
      const v = value();
      if (v === undefined) return usage(warn, `${flag} needs a value`);
      serve.push(flag, v);
    } else if (SERVE_SWITCHES.has(flag)) serve.push(flag);
    else warn(`app-server: ignoring unknown flag ${raw}`);
  }
  return { serve: ["--listen", listen, ...serve] };
}

function usage(warn: (line: string) => void, message: string): Translation {
  warn(`app-server: ${message}`);
  return { exit: 2 };
}

const HELP = `app-server app-server [options] — run like Codex's \`codex app-server\` (stdio by default)

Options (Codex's):
  --listen URL            stdio:// (default) or ws://HOST:PORT
  --stdio                 same as --listen stdio://
  --ws-token-file PATH    clients must send the token in this file (Authorization: Bearer)
  -c model=M, -c model_provider=P
                          default model and provider of new threads
  Other Codex flags (--enable, --disable, -c KEY=VALUE, --analytics-default-enabled, --ws-auth …)
  are accepted and ignored with a warning on stderr.
Options of \`app-server serve\` (--home, --database-url, --model, --model-provider, …) work too.
`;

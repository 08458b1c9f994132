# agent-app-server as a container image.
#
#   docker build -t agent-app-server .
#   docker run --init --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#     -p 127.0.0.1:4500:4500 -v "$PWD/secrets/app_server_token:/run/secrets/app_server_token:ro" \
#     -e APP_SERVER_AUTH_TOKEN_FILE=/run/secrets/app_server_token -v aas-data:/data agent-app-server
#
# Inside the container the server listens on all interfaces (ws://0.0.0.0:4500) and requires a token:
# mount a token file and set APP_SERVER_AUTH_TOKEN_FILE (or set APP_SERVER_AUTH_TOKEN, at least 16
# characters; without either it generates one into /data/auth-token). Clients send
# `Authorization: Bearer <token>`. APP_SERVER_AUTH=token-any-user: the token alone admits a client —
# the same-user check for loopback peers guards a shared machine, and a container has no other users
# (clients from the host arrive through Docker's network, `docker compose exec` as root).
# Secret files: APP_SERVER_AUTH_TOKEN_FILE, DATABASE_URL_FILE or DATABASE_PASSWORD_FILE (put into
# DATABASE_URL, URL-encoded), ANTHROPIC_API_KEY_FILE, OPENAI_API_KEY_FILE.
#
# Node.js: the LTS line 24, pinned to a release (24.21.0, its newest on the npm registry as of
# Dec 2026: 24.11.1 missed ten months of security releases); bump both FROM lines together.
# docker-compose.yml next to this file runs it with Postgres; see docs/self-hosting.md.

# ---- build: dev dependencies (TypeScript) and dist/ ----
FROM node:24.21.0-slim AS build
WORKDIR /app
# Dependencies first, so the layer is reused while only the source changes. --ignore-scripts:
# `prepare` would build before the source is copied; the build runs explicitly below.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY . .
# public/ (the web playground) is optional: make sure the runtime stage has something to copy.
# patches/ (a postgres.js fix, see patches/README.md) is applied here: npm ci ran with --ignore-scripts.
# The bundle built from it carries the fix into the runtime stage.
RUN npx patch-package && npm run build && mkdir -p public

# ---- runtime: production dependencies only; the server runs as `node` ----
FROM node:24.21.0-slim AS runtime
# The home (database files when DATABASE_URL is unset) and the folder threads run in when their
# client sends no cwd: both volumes, both the `node` user's.
ENV NODE_ENV=production \
    APP_SERVER_HOME=/data \
    APP_SERVER_WORKSPACE=/workspace \
    APP_SERVER_AUTH=token-any-user
WORKDIR /app
# bubblewrap is the OS sandbox every read-only / workspace-write command runs in; git and bash are
# what agent commands expect. Without a working sandbox such commands are refused, never run
# unconfined: bwrap needs user namespaces, which Docker's default seccomp and AppArmor profiles
# block, so run the container with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`
# (docker-compose.yml does), or give threads danger-full-access and let the container be the sandbox.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# --omit=dev: no TypeScript, vitest or tsx in the image. --ignore-scripts: `prepare` runs the
# build, which needs tsc (a dev dependency); dist/ comes from the build stage instead.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/migrations ./migrations
COPY --from=build /app/protocol ./protocol
COPY --from=build /app/public ./public
COPY --from=build /app/scripts/container-entrypoint.sh /usr/local/bin/app-server-entrypoint
# /data and /workspace belong to the `node` user (uid 1000) that the server runs as; the
# application files stay root-owned and read-only.
RUN mkdir -p /data /workspace && chown node:node /data /workspace
VOLUME ["/data", "/workspace"]
# No USER: the entry point starts as root only to make the secret files (compose mounts them with
# the host's owner and mode) readable by `node`, then runs the command as `node`, with no
# capabilities (scripts/container-entrypoint.sh).
ENTRYPOINT ["app-server-entrypoint"]
EXPOSE 4500
# /readyz answers 200 once the database is migrated and connections are accepted. slim images
# have no curl: Node's fetch does the probe.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:4500/readyz').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))"]
# SIGTERM (docker stop) closes sockets, interrupts running turns and closes the database.
CMD ["node", "bin/app-server.js", "serve", "--listen", "ws://0.0.0.0:4500"]

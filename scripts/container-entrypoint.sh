#!/bin/sh
# The container image's entry point (Dockerfile ENTRYPOINT). It starts as root only to make the
# secret files readable by the server's user, then becomes that user and runs the command.
#
# Why: compose mounts a file secret with its owner and mode on the host (compose ignores the
# uid/gid/mode options of file secrets), so a `chmod 600` secret of any host user other than uid
# 1000 cannot be read by the server, which runs as `node` (uid 1000): it exited with "cannot read
# auth token file …: EACCES" and `restart: unless-stopped` restarted it forever.
#
# Each *_FILE variable below that names a file the server's user cannot read gets a copy that user
# owns (mode 0400) in a directory of its own under /dev/shm (memory: never the image or a volume),
# and the variable then names the copy. Needs the capabilities CHOWN, DAC_READ_SEARCH, SETUID and
# SETGID (docker-compose.yml adds them back after dropping all); the server itself runs with none.
#
# APP_SERVER_RUN_AS (default node) and APP_SERVER_SECRETS_DIR (default /dev/shm/app-server-secrets)
# choose the user and the directory. Started as another user (docker run --user), it only runs the
# command.
set -eu

run_as="${APP_SERVER_RUN_AS:-node}"
if [ "$(id -u)" != 0 ]; then
  exec "$@"
fi

uid="$(id -u "$run_as")"
gid="$(id -g "$run_as")"
# As the server's user, with its groups (setpriv: util-linux, essential on Debian).
as_user() {
  setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"
}

# Made by root and handed over once filled: root holds no CAP_DAC_OVERRIDE to write into a
# directory it does not own.
dir="${APP_SERVER_SECRETS_DIR:-/dev/shm/app-server-secrets}"
rm -rf "$dir"
mkdir -m 0700 "$dir"
for var in APP_SERVER_AUTH_TOKEN_FILE DATABASE_URL_FILE DATABASE_PASSWORD_FILE ANTHROPIC_API_KEY_FILE OPENAI_API_KEY_FILE; do
  eval "file=\${$var:-}"
  # Unset, missing or already readable: left as it is (the server says what is wrong with it).
  if [ -z "$file" ] || [ ! -f "$file" ] || as_user test -r "$file"; then
    continue
  fi
  copy="$dir/$var"
  cp "$file" "$copy"
  chmod 0400 "$copy" # before chown: changing the mode of another user's file needs CAP_FOWNER
  chown "$uid:$gid" "$copy"
  export "$var=$copy"
done
chown "$uid:$gid" "$dir"

# The user's own home, not root's (the default workspace and tools look there).
HOME="$(getent passwd "$run_as" | cut -d: -f6)"
export HOME
exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"

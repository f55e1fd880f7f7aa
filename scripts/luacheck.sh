#!/bin/sh
# make test's Lua static check. luacheck is Debian's lua-check (no registry this
# project installs from has a Lua linter): used when on PATH (or LUACHECK=path),
# installed when this is a Debian machine and we are root (as on CI, where
# .ci/run installs it first anyway); elsewhere the check is skipped with one line
# saying how to get it, so that `make test` still runs everything else.
set -eu
luacheck=${1:-luacheck}
if ! command -v "$luacheck" >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lua-check >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lua-check; }
  fi
fi
if ! command -v "$luacheck" >/dev/null 2>&1; then
  echo "make test: luacheck not found, the Lua static check is skipped:" \
    "install it (apt-get install lua-check) or run make test LUACHECK=path/to/luacheck" >&2
  exit 0
fi
exec "$luacheck" .

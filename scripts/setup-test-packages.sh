#!/usr/bin/env bash
# Installs the Debian packages only tests need, when missing: Chromium and its ChromeDriver
# (/usr/bin/chromium, /usr/bin/chromedriver) for the console's browser tests, tmux for the
# CLI's terminal test, systemd for `systemd-analyze verify` of the example unit, and
# pgbouncer for the store behind a connection pooler.
# Idempotent: does nothing when all are there. Needs root (or sudo) the first time.
set -euo pipefail
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
if ((${#missing[@]} == 0)); then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup-test-packages: run as root or install sudo" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup-test-packages: installing ${missing[*]} (Debian packages)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
  # The package lists may be missing or stale on a fresh machine.
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

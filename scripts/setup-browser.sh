#!/usr/bin/env bash
# Installs what the console's browser tests drive (crates/slipway/tests/console.rs): Debian's
# Chromium and its ChromeDriver, /usr/bin/chromium and /usr/bin/chromedriver. Idempotent:
# does nothing when both are there. Needs root (or sudo) the first time.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup-browser: run as root or install sudo" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup-browser: installing chromium and chromium-driver" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null; then
  # The package lists may be missing or stale on a fresh machine.
  $sudo apt-get update >/dev/null
  $sudo apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null
fi

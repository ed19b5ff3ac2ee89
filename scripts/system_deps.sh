#!/usr/bin/env bash
# Debian/Ubuntu packages the tests need: EGL/OSMesa for headless MuJoCo rendering, Chromium for the
# browser test (Playwright drives Debian's build; it never downloads a browser of its own).
set -euo pipefail

#   scripts/system_deps.sh [runtime]   runtime: only what training needs (no browser)
PACKAGES=(libegl1 libgl1 libosmesa6)
[ "${1:-}" = "runtime" ] || PACKAGES+=(chromium)
missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "rlhf setup: warning: not a Debian/Ubuntu system; install ${missing[*]} (or equivalents) yourself" >&2
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "rlhf setup: installing system packages: ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

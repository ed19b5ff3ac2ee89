#!/usr/bin/env bash
# Idempotent environment setup shared by run.sh and test.sh (source it, or run it directly).
#   scripts/setup.sh [EXTRAS]   e.g. scripts/setup.sh test,bench
# Creates .venv with Python >= 3.11 if missing, then installs the package in editable mode with
# every dependency at the version requirements/lock.txt names (torch: the CPU build when one is on
# this machine's pip find-links, else PyPI's default build of the same version).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RLHF_VENV:-$ROOT/.venv}"
EXTRAS="${1:-}"

# Every version comes from the committed lock (scripts/lock.sh refreshes it), used as pip
# constraints: the extras asked for install exactly as CI tested them, and nothing else comes along.
LOCK="$ROOT/requirements/lock.txt"
case ",$EXTRAS," in *,goals,*) LOCK="$ROOT/requirements/lock-goals.txt" ;; esac
case ",$EXTRAS," in *,dmc,*)
    if [ "$LOCK" != "$ROOT/requirements/lock.txt" ]; then
        # Each pins mujoco to releases the other refuses (goals: < 3.4; dmc: 3.17 up to 4).
        echo "rlhf setup: error: the goals and dmc extras need different mujoco releases; install one of them" >&2
        exit 2
    fi
    LOCK="$ROOT/requirements/lock-dmc.txt"
    ;;
esac

pick_python() {
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "rlhf setup: error: Python >= 3.11 is required (set PYTHON=/path/to/python3.11)" >&2
    return 1
}

# One setup at a time per venv: two pips installing into one venv at once (run.sh and test.sh
# started side by side) left it broken, a package's metadata half written.
if command -v flock >/dev/null 2>&1; then
    SETUP_LOCK="$(dirname "$VENV")/.$(basename "$VENV").setup-lock"
    exec 9>"$SETUP_LOCK"
    if ! flock -n 9; then
        echo "rlhf setup: waiting for another setup of $VENV to finish" >&2
        flock 9
    fi
fi

if [ ! -x "$VENV/bin/python" ]; then
    PY="$(pick_python)"
    echo "rlhf setup: creating $VENV with $PY" >&2
    "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)

PIP+=(--constraint "$LOCK")

if ! "$VENV/bin/python" -c 'import torch' >/dev/null 2>&1; then
    # The lock's torch==2.13.0 matches a local +cpu wheel when pip's find-links has one (small, no
    # CUDA); elsewhere it is PyPI's default build of the same version.
    echo "rlhf setup: installing torch" >&2
    "${PIP[@]}" torch
fi

# Whether this checkout's rlhf is installed in the venv, no older than its metadata and the lock.
installed_here() {
    local stamp
    for stamp in "$VENV"/.rlhf-installed-*; do
        [ -f "$stamp" ] && [ "$stamp" -nt "$ROOT/pyproject.toml" ] && [ "$stamp" -nt "$LOCK" ] &&
            "$VENV/bin/python" -c 'import rlhf, sys; sys.exit(not rlhf.__file__.startswith(sys.argv[1]))' \
                "$ROOT/" 2>/dev/null && return 0
    done
    return 1
}

# Re-installs only when the package's metadata or the lock changed since the last install.
STAMP="$VENV/.rlhf-installed-${EXTRAS:-base}"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ] || [ "$LOCK" -nt "$STAMP" ]; then
    echo "rlhf setup: installing rlhf${EXTRAS:+[$EXTRAS]} into $VENV from $(basename "$LOCK")" >&2
    if [ -n "$EXTRAS" ] && [ "$LOCK" = "$ROOT/requirements/lock.txt" ] && installed_here; then
        # Only the extras' own requirements: reinstalling rlhf itself would rewrite its console
        # script and import hook under any rlhf running from this venv (a test runs this line
        # while others start the venv's rlhf, and one found no `rlhf` beside its Python).
        LISTED="$("$VENV/bin/python" - "$ROOT/pyproject.toml" "$EXTRAS" <<'PY'
import sys, tomllib
extras = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]
for name in sys.argv[2].split(","):
    if name not in extras:
        print(f"rlhf setup: error: no extra called {name!r} (one of: {', '.join(extras)})",
              file=sys.stderr)
        sys.exit(2)
    print("\n".join(extras[name]))
PY
        )"
        mapfile -t REQUIREMENTS <<<"$LISTED"
        "${PIP[@]}" "${REQUIREMENTS[@]}"
    else
        "${PIP[@]}" -e "$ROOT${EXTRAS:+[$EXTRAS]}"
    fi
    touch "$STAMP"
fi

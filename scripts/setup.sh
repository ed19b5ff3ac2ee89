#!/usr/bin/env bash
# Idempotent environment setup shared by run.sh and test.sh (source it, or run it directly).
#   scripts/setup.sh [EXTRAS]   e.g. scripts/setup.sh test,bench
# Creates .venv with Python >= 3.11 if missing, installs torch (the CPU build when one is on
# this machine's pip find-links, else PyPI's default), then the package in editable mode.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RLHF_VENV:-$ROOT/.venv}"
EXTRAS="${1:-}"

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

if [ ! -x "$VENV/bin/python" ]; then
    PY="$(pick_python)"
    echo "rlhf setup: creating $VENV with $PY" >&2
    "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)

if ! "$VENV/bin/python" -c 'import torch' >/dev/null 2>&1; then
    # torch==2.13.0 matches a local +cpu wheel when pip's find-links has one (small, no CUDA);
    # elsewhere it is PyPI's default build. RLHF_TORCH overrides the requirement.
    echo "rlhf setup: installing torch" >&2
    "${PIP[@]}" "${RLHF_TORCH:-torch==2.13.0}" || "${PIP[@]}" "torch>=2.3"
fi

STAMP="$VENV/.rlhf-installed-${EXTRAS:-base}"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ]; then
    echo "rlhf setup: installing rlhf${EXTRAS:+[$EXTRAS]} into $VENV" >&2
    "${PIP[@]}" -e "$ROOT${EXTRAS:+[$EXTRAS]}"
    touch "$STAMP"
fi

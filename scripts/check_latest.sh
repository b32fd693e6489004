#!/usr/bin/env bash
# Drift check: the project against the NEWEST versions its ranges allow, before users meet them.
#   bash scripts/check_latest.sh [pytest args...]
# Builds a throwaway virtual environment (ignoring requirements/test.txt, the lock the test command
# installs from), installs the package with its test and embeddings extras at the newest versions
# every range in pyproject.toml allows, and the newest pyright from npm, then runs ruff, the import
# contract, pyright and the fast tests. Needs the network (PyPI, npm); not part of CI, whose
# results must not change because something was released today. When it finds drift, fix the code
# (or narrow a range if a release is broken), then refresh the lock as requirements/test.txt says.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
WORK="${CHECK_LATEST_DIR:-$(mktemp -d -t mcp-gateway-latest.XXXXXX)}"
echo "drift check in $WORK"

python3 -m venv "$WORK/venv"
PY="$WORK/venv/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
# --upgrade-strategy eager: every dependency, direct or not, at its newest allowed release.
"$PY" -m pip install --quiet --disable-pip-version-check --upgrade --upgrade-strategy eager \
    -e "$ROOT[test,embeddings]"
"$PY" -m pip list --format=freeze --disable-pip-version-check >"$WORK/versions.txt"

# The newest pyright, in a folder of its own (the repository's node_modules keeps the locked one).
npm install --prefix "$WORK/npm" --no-audit --no-fund --loglevel=error pyright@latest >/dev/null
PYRIGHT="$WORK/npm/node_modules/.bin/pyright"

echo "newest allowed: $(grep -iE '^(mcp|pydantic|httpx2|starlette|uvicorn|anyio|cryptography|ruff|import-linter|pytest)==' "$WORK/versions.txt" | tr '\n' ' ')"
echo "pyright $("$PYRIGHT" --version)"

"$PY" -m ruff check --quiet mcp_gateway tests scripts
"$WORK/venv/bin/lint-imports" --no-cache >/dev/null || "$WORK/venv/bin/lint-imports" --no-cache
"$PYRIGHT" --pythonpath "$PY"
"$PY" -m pytest -q -p no:benchmark -p no:cacheprovider -m "not slow" "$@"
echo "drift check: clean against the newest allowed versions (listed in $WORK/versions.txt)"

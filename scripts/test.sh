#!/usr/bin/env bash
# Install everything the test suite needs on a fresh machine, then run it.
#   bash scripts/test.sh [pytest args...]          the whole suite (what .ci/run runs)
#   bash scripts/test.sh --fast [pytest args...]   lint, types, import contract, and the tests not
#                                                  marked slow: no processes, browsers or databases
# Every tool and test dependency comes from a lock kept in the repository, so this gives the same
# result on any day: Python packages from requirements/test.txt (exact versions with hashes; the
# package itself then goes in editable without its dependencies), npm packages from
# package-lock.json (`npm ci`). System packages (a browser, PostgreSQL, HAProxy, Prometheus for the
# end-to-end tests) come from apt when missing. Re-running is cheap: every step skips what is present.
# `bash scripts/check_latest.sh` runs the same checks against the newest versions the ranges allow.
set -euo pipefail
cd "$(dirname "$0")/.."

FAST=
if [ "${1:-}" = "--fast" ]; then
    FAST=1
    shift
fi

PIP=(python3 -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" --require-hashes -r requirements/test.txt
"${PIP[@]}" --no-deps -e .

# npm ci installs exactly package-lock.json; it runs again only when the lock changed since.
if [ -f package-lock.json ] && command -v npm >/dev/null; then
    if ! cmp -s package-lock.json node_modules/.mcp-gateway-lock 2>/dev/null; then
        npm ci --no-audit --no-fund --loglevel=error >/dev/null
        cp package-lock.json node_modules/.mcp-gateway-lock
    fi
fi

# System packages come from apt only when missing; apt-get update runs once, before the first install.
APT_UPDATED=
apt_install() {
    if [ -z "$APT_UPDATED" ]; then
        apt-get update -qq >/dev/null
        APT_UPDATED=1
    fi
    # confold: keep a config file written before the install (createcluster.conf below) without asking.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" >/dev/null
}

# What only the end-to-end tests need (the fast lane starts none of these).
system_packages() {
# Headless Chromium for the browser tests (tests/e2e/test_browser.py), driven by Playwright with
# executable_path=/usr/bin/chromium: Debian's package, since Playwright's own browser download is
# not reachable here.
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null; then
    apt_install chromium
fi

# PostgreSQL server binaries for the several-instances tests (tests/store/test_postgres.py,
# tests/e2e/test_postgres_e2e.py): tests/support/postgres.py runs initdb/pg_ctl on a throwaway
# cluster of its own, so Debian's default cluster is not created (createcluster.conf) and no
# service is started. Debian keeps initdb in /usr/lib/postgresql/<version>/bin, off PATH.
if ! command -v initdb >/dev/null && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null \
    && command -v apt-get >/dev/null; then
    mkdir -p /etc/postgresql-common
    [ -f /etc/postgresql-common/createcluster.conf ] \
        || echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
    apt_install --no-install-recommends postgresql
fi

# HAProxy in front of two gateway instances (tests/e2e/test_production.py): the test writes its
# own haproxy.cfg on loopback ports and runs `haproxy -f cfg -db`; Debian's service is not used.
if ! command -v haproxy >/dev/null && [ ! -x /usr/sbin/haproxy ] && command -v apt-get >/dev/null; then
    apt_install --no-install-recommends haproxy
fi

# Prometheus for the metrics test (tests/e2e/test_metrics_e2e.py): the test starts its own server on
# loopback with a config of its own; the packaged service is not what it scrapes with.
if ! command -v prometheus >/dev/null && command -v apt-get >/dev/null; then
    apt_install --no-install-recommends prometheus
fi

}
if [ -z "$FAST" ]; then
    system_packages
fi

# Static checks first: they take seconds and say exactly what is wrong.
python3 -m ruff check --quiet mcp_gateway tests scripts
lint-imports --no-cache >/dev/null || lint-imports --no-cache
npx --no-install pyright

# Bytecode once, up front, and kept: this environment may set PYTHONDONTWRITEBYTECODE, and then every
# gateway process a test spawns would compile the package again (~0.3 s of CPU each), and pytest would
# rewrite every test module's asserts again on each run (it caches the rewritten code only where
# bytecode may be written): most of a warm fast lane's collection time.
unset PYTHONDONTWRITEBYTECODE
python3 -m compileall -q -j 0 mcp_gateway tests scripts >/dev/null

# The fast lane runs the tests not marked slow (tests/e2e is slow as a whole: tests/conftest.py).
SELECT=()
if [ -n "$FAST" ]; then
    SELECT=(-m "not slow")
fi

# Two workers, one test file each at a time (--dist loadfile: a file's module-scoped fixtures and its
# gateway processes stay in one worker). Most of the suite's time is spent waiting on the gateway and
# upstream processes the end-to-end tests spawn, so two workers overlap that waiting on two cores;
# the fast lane, all CPU, uses both cores the same way.
# Every fixture is parallel-safe: ports are picked free, state lives in per-test tmp folders, the
# PostgreSQL cluster is per worker session (its own folder and free port), and Chromium gets a fresh
# profile per launch. PYTEST_WORKERS=0 runs everything in this one process (e.g. to debug a test).
WORKERS="${PYTEST_WORKERS:-2}"
PYTEST=(python3 -m pytest -q)
if [ "$WORKERS" != "0" ]; then
    # -p no:benchmark: a pytest-benchmark installed beside us would warn (an error here) under xdist.
    PYTEST+=(-n "$WORKERS" --dist loadfile -p no:benchmark)
fi
if [ -n "$FAST" ] || [ "$#" -gt 0 ]; then
    exec "${PYTEST[@]}" "${SELECT[@]}" "$@"
fi

# The whole suite, then the protocol tests again with every fast path off (server/fast,
# tracing/fast; docs/operations.md "Fast paths"): stdio, both HTTP revisions and elicitation through
# the official SDK client, and traces, served by the public SDK and OpenTelemetry path alone. The
# gateways these tests start inherit the switch (tests/support/env.py).
PROTOCOL_TESTS=(
    tests/e2e/test_meta_tools.py
    tests/e2e/test_http_transport.py
    tests/e2e/test_elicitation.py
    tests/e2e/test_tracing_e2e.py
)
"${PYTEST[@]}"
echo "The protocol tests again, with MCP_GATEWAY_FAST_PATHS=0:"
MCP_GATEWAY_FAST_PATHS=0 exec "${PYTEST[@]}" "${PROTOCOL_TESTS[@]}"

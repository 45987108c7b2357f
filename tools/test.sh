#!/usr/bin/env bash
# The test suite on a fresh Debian or Ubuntu machine: installs and starts what it needs, then runs pytest.
#
#     tools/test.sh [PYTEST ARGS...]
#
# Uses the active virtualenv, else ./.venv (made when missing), and installs the package with its
# test and plot extras there. Installs redis-server (7.0 or later) and Chromium with chromedriver
# with apt-get when they are missing (as root, or through sudo). When no Redis answers at
# SIMHASH_TEST_REDIS_URL (default redis://127.0.0.1:6379/9), starts one of its own on a free port for
# the run and stops it afterwards. A test that needs Redis or Chromium fails, never skips, without it.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${VIRTUAL_ENV:-}" ]; then
    [ -x .venv/bin/python ] || python3 -m venv .venv
    . .venv/bin/activate
fi
python -m pip install --quiet -e '.[test,plot]'

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
{ command -v chromium >/dev/null && command -v chromedriver >/dev/null; } || missing+=(chromium chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

export SIMHASH_TEST_REDIS_URL="${SIMHASH_TEST_REDIS_URL:-redis://127.0.0.1:6379/9}"
if ! python -c 'import os, redis; redis.Redis.from_url(os.environ["SIMHASH_TEST_REDIS_URL"]).ping()' 2>/dev/null; then
    port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    folder=$(mktemp -d)
    redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
        --dir "$folder" --pidfile "$folder/redis.pid" --logfile "$folder/redis.log"
    trap 'kill "$(cat "$folder/redis.pid")" 2>/dev/null; rm -rf "$folder"' EXIT
    export SIMHASH_TEST_REDIS_URL="redis://127.0.0.1:$port/9"
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi

python -m pytest -p no:cacheprovider "$@"

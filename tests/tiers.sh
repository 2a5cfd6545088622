#!/usr/bin/env bash
# `make test`'s tiers, run side by side on the machine's cores (docs/testing.md):
#
#   stack  the end-to-end and browser tiers, in one pytest with its session stack. They spend
#          most of their time waiting on the stack's clocks (expiry, heartbeats, schedules) and
#          their workers must renew in time, so they run at the normal priority.
#   own    the end-to-end files that start stacks of their own and never use the session's
#          (OWN_STACK_FILES: starts, restarts, failed starts, the fallback, what a start prints
#          and where it listens, the load bench's scratch stack), in a pytest beside the stack
#          tier's, so their starts and stops overlap its waits. At nice 5: the stack tier's
#          workers come first.
#   rest   tests/ less e2e and browser (unit, aws, infra, conformance, reliability), under
#          pytest-xdist: REST_WORKERS processes, a test file at a time each, so a file's module
#          fixtures and order hold; every worker that reaches a DynamoDB Local test starts an
#          engine of its own. At a lower priority (nice): it takes every cycle the stack tiers
#          leave, and never one they need.
#
# Each run has its own temporary directory and log under .tenure/tiers; the logs are printed
# once all have ended, and any failing fails the script. Every process appends the AWS calls
# it makes under $TENURE_AWS_CALLS_RUN (rest.jsonl; stack.jsonl for every process the stack
# and own runs start, through tests/infra/stack_calls on their PYTHONPATH), which
# tests/infra/test_least_privilege_run.py judges afterwards.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=${BIN:-.venv/bin}
OUT=.tenure/tiers
CALLS=${TENURE_AWS_CALLS_RUN:?the directory the runs append their AWS calls to}
# Set, it makes test_least_privilege_run.py judge the files: only once every run has ended.
unset TENURE_AWS_CALLS_RUN
REST_WORKERS=${REST_WORKERS:-2}
OWN_STACK_FILES=(
  tests/e2e/test_stack_cli.py
  tests/e2e/test_local_is_local.py
  tests/e2e/test_fallback.py
  tests/e2e/test_start_failures.py
  tests/e2e/test_local_banner.py
  tests/e2e/test_load_start.py
)
PYTEST=("$BIN/pytest" -q -p no:cacheprovider --durations="${DURATIONS:-10}" ${PYTEST_ARGS:-})
# DynamoDB Local's JVM spends much of its CPU compiling hot code a second time with the
# optimizing compiler: the quick compiler alone and the serial collector took a fifth off the
# CPU of two conformance files (docs/testing.md), and the suite waits on the cores.
export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"
export TENURE_REQUIRE_ENGINES=1
# xdist's workers must collect the same tests in the same order, and some parametrizations
# iterate a set: one hash seed for the run's processes, still a new one each run (printed, to
# repeat a run).
export PYTHONHASHSEED=${PYTHONHASHSEED:-$((RANDOM * 32768 + RANDOM))}
echo "PYTHONHASHSEED=$PYTHONHASHSEED"

rm -rf "$OUT" && mkdir -p "$OUT"
# This machine's environment sets PYTHONDONTWRITEBYTECODE, so every process the runs start
# (each stack, its function processes, each CLI and worker) would compile the project's modules
# from source again: written once here, their bytecode is read by all (a stack's start and stop
# took 6.5 s of CPU with it, 6.7 to 8.4 without).
"$BIN/python" -m compileall -q layers packages tests functions > /dev/null
declare -A PIDS
run() {
  local name=$1
  shift
  "$@" --basetemp="$OUT/$name-tmp" > "$OUT/$name.log" 2>&1 &
  PIDS[$name]=$!
}

IGNORE_OWN=()
for file in "${OWN_STACK_FILES[@]}"; do
  IGNORE_OWN+=("--ignore=$file")
done
STACK_ENV=(env "PYTHONPATH=$ROOT/tests/infra/stack_calls:$ROOT" "TENURE_AWS_CALLS_FILE=$CALLS/stack.jsonl")
run stack "${STACK_ENV[@]}" "${PYTEST[@]}" "${IGNORE_OWN[@]}" tests/e2e tests/browser
run own nice -n 5 "${STACK_ENV[@]}" "${PYTEST[@]}" "${OWN_STACK_FILES[@]}"
run rest nice -n 10 env "TENURE_AWS_CALLS_FILE=$CALLS/rest.jsonl" "${PYTEST[@]}" \
  -n "$REST_WORKERS" --dist loadfile --ignore=tests/e2e --ignore=tests/browser tests

failed=()
for name in rest stack own; do
  wait "${PIDS[$name]}" || failed+=("$name")
done
for name in rest stack own; do
  echo "== $name: $(tail -n 1 "$OUT/$name.log")"
done
for name in rest stack own; do
  echo "== $name =="
  cat "$OUT/$name.log"
done
if ((${#failed[@]})); then
  echo "== failed: ${failed[*]} (logs in $OUT)"
  exit 1
fi

#!/usr/bin/env bash
# tests/stress.sh N: runs the README's test command N times while two busy
# loops keep both CPUs of a small machine loaded, and prints
# "N passed, N failed". A test that decides by the clock fails here first.
#
#   tests/stress.sh 10                 # from the repository root or anywhere
#   BUILD=build-asan tests/stress.sh 3 # another (already set-up) build dir
#
# Each run's log is kept in $BUILD-stress/run-K.log (beside the build
# directory, not in it: the first run must find no build directory when
# there is none, as a new user's does). The busy loops are killed at the
# end, on Ctrl-C and on any exit.
set -uo pipefail
cd "$(dirname "$0")/.."

n=${1:-}
case "$n" in
  '' | *[!0-9]* | 0)
    echo "usage: tests/stress.sh N   (N > 0 runs of the README's test command)" >&2
    exit 2
    ;;
esac
build=${BUILD:-build}

busy=()
stop_busy() {
  for pid in "${busy[@]}"; do
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  busy=()
}
trap stop_busy EXIT
trap 'stop_busy; exit 130' INT
trap 'stop_busy; exit 143' TERM

for i in 1 2; do
  (while :; do :; done) &
  busy+=("$!")
done

logs=$build-stress
mkdir -p "$logs"
passed=0
failed=0
start=$(date +%s)
for k in $(seq 1 "$n"); do
  log="$logs/run-$k.log"
  t0=$(date +%s)
  # The README's second command, as a new user runs it.
  if { bash .ci/install-deps && { [ -d "$build" ] || meson setup "$build"; } \
      && meson compile -C "$build" && meson test -C "$build" --print-errorlogs; } >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "run $k: passed ($(($(date +%s) - t0)) s)"
  else
    failed=$((failed + 1))
    echo "run $k: FAILED ($(($(date +%s) - t0)) s), log: $log"
    grep -E "^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT|ERROR)" "$log" | sed 's/^/    /'
  fi
done
stop_busy
echo "stress: $n runs in $(($(date +%s) - start)) s beside 2 busy loops"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS (default 60) under ASan and UBSan,
# starting from its committed seed corpus (tests/fuzz/corpus/<target>/); new
# inputs go to build/fuzz/corpus-<target>/, a crashing input to
# build/fuzz/findings/. Exit status 1 if any target found something.
#
#   ./configure.py && ninja fuzz && tests/fuzz/run.sh 60
set -uo pipefail

secs="${1:-60}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
ninja fuzz >/dev/null || { echo "run.sh: ninja fuzz failed (is clang with libFuzzer installed? see tests/fuzz/README.md)" >&2; exit 1; }
mkdir -p build/fuzz/findings
# The targets run at once, each on a core of its own (libFuzzer runs one process, one
# thread, per target): each still fuzzes for SECONDS, in half the wall time on 2 cores.
fuzz() {
    local target="$1" max_len
    case "$target" in idx) max_len=16384 ;; json) max_len=65536 ;; esac
    mkdir -p "build/fuzz/corpus-$target"
    # exec: the background job is the fuzzer itself, which the trap below can stop
    exec "build/fuzz/fuzz_$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -max_len="$max_len" -close_fd_mask=3 -print_final_stats=1 \
        -artifact_prefix="build/fuzz/findings/$target-" \
        "build/fuzz/corpus-$target" "tests/fuzz/corpus/$target" > "build/fuzz/fuzz_$target.log" 2>&1
}
targets=(idx json)
declare -A pid
# run.sh ending early (SIGINT, SIGTERM) leaves no fuzzer running; after the waits below
# there is none left to stop
trap 'kill $(jobs -p) 2>/dev/null' EXIT
trap 'exit 1' INT TERM
for target in "${targets[@]}"; do
    fuzz "$target" &
    pid[$target]=$!
done
status=0
for target in "${targets[@]}"; do
    wait "${pid[$target]}"
    rc=$?
    echo "# fuzz_$target: ${secs} s from tests/fuzz/corpus/$target ($(ls "tests/fuzz/corpus/$target" | wc -l) seeds)"
    grep -E "INITED|DONE|stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY|Test unit written" \
        "build/fuzz/fuzz_$target.log" | sed "s/^/  /"
    if [ "$rc" -ne 0 ]; then
        echo "# fuzz_$target: FINDING (exit $rc); log build/fuzz/fuzz_$target.log" >&2
        tail -n 40 "build/fuzz/fuzz_$target.log" >&2
        status=1
    fi
done
exit "$status"

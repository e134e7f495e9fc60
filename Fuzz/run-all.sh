#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS (default 300), one after another; any
# further arguments go to `swift build` (CI passes -Xswiftc -warnings-as-errors).
# The corpus grows in .build/corpus/<target> (seeded from Corpus/); crashes land in Artifacts/.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-300}
shift || true
swift build -c release --sanitize=fuzzer --sanitize=address "$@"
mkdir -p Artifacts
# Swift's backtracer would take a trap's signal before libFuzzer, and under AddressSanitizer it
# crashes reading the process's memory, so the input that trapped is lost. Off, libFuzzer reports
# the trap as a deadly signal and saves the input in Artifacts/.
export SWIFT_BACKTRACE=enable=no
# A target whose Swift code lost its coverage counters still runs, blind; refuse it.
for target in TraceReader DurationText MarbleParser ClientAddress RateLimitFields; do
  counters=$(".build/release/Fuzz$target" -runs=0 2>&1 | sed -n 's/.*(\([0-9]*\) inline 8-bit counters).*/\1/p')
  if [ "${counters:-0}" -lt 1000 ]; then
    echo "Fuzz$target has ${counters:-no} coverage counters: its Swift code is not instrumented" >&2
    exit 1
  fi
done
for target in TraceReader DurationText MarbleParser ClientAddress RateLimitFields; do
  mkdir -p ".build/corpus/$target"
  echo "== Fuzz$target for ${seconds}s"
  ".build/release/Fuzz$target" ".build/corpus/$target" "Corpus/$target" \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="Artifacts/$target-" -print_final_stats=1
done

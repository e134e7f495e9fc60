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
for target in TraceReader DurationText MarbleParser ClientAddress RateLimitFields; do
  mkdir -p ".build/corpus/$target"
  echo "== Fuzz$target for ${seconds}s"
  ".build/release/Fuzz$target" ".build/corpus/$target" "Corpus/$target" \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="Artifacts/$target-" -print_final_stats=1
done

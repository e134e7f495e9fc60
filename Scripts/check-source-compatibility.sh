#!/usr/bin/env bash
# Type-checks Tests/SourceCompatibility/*.swift (calls that compiled against an earlier release)
# against the current debug build's modules: an error means a user's code no longer compiles.
# Deprecation warnings are expected there and allowed. Run after `swift build`.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(swift build --show-bin-path)
status=0
for file in Tests/SourceCompatibility/*.swift; do
  if out=$(swiftc -typecheck -swift-version 6 -I "$bin/Modules" \
    -Xcc -fmodule-map-file="$bin/CPaceSupport.build/module.modulemap" "$file" 2>&1); then
    echo "ok: $file ($(grep -c 'warning:' <<<"$out" || true) deprecation warnings)"
  else
    echo "$out" | grep -E 'error:' >&2
    echo "error: $file no longer compiles against this build" >&2
    status=1
  fi
done
exit $status

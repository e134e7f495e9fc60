#!/usr/bin/env bash
# Type-checks Tests/SourceCompatibility/*.swift (calls that compiled against an earlier release,
# one file per release: RateLimiterCalls-0.1.0 and Calls-0.1.0, Calls-0.2.0, Calls-0.3.0) against the current
# debug build's modules: an error means a user's code no longer compiles. Deprecation warnings are
# expected there and allowed. Run after `swift build`.
#
# --server: Tests/SourceCompatibility/Server/*.swift (the server products' calls: PacePostgres,
# PaceHummingbird, PaceVapor) against the server build, .build-server with the traits, as .ci/run's
# server step builds it; skipped with a line saying so when that build does not exist yet.
#
# --bin DIR: against the modules built in DIR instead (a release's own build, say, to prove that
# a file's calls compiled then: `swift build --show-bin-path` in a worktree of the tag).
set -euo pipefail
cd "$(dirname "$0")/.."
files=(Tests/SourceCompatibility/*.swift)
build=(swift build)
bin=
while (($#)); do
  case $1 in
    --server)
      files=(Tests/SourceCompatibility/Server/*.swift)
      build=(swift build --scratch-path .build-server --traits PostgreSQL,Hummingbird,Vapor,AsyncHTTPClient)
      ;;
    --bin) bin=$2; shift ;;
    *) echo "usage: $0 [--server] [--bin DIR]" >&2; exit 2 ;;
  esac
  shift
done
bin=${bin:-$("${build[@]}" --show-bin-path)}
if [[ ! -d $bin/Modules ]]; then
  echo "skipped: no build in $bin (run ${build[*]} first)"
  exit 0
fi
# What SwiftPM gives a module of the package: its Swift modules, and each C module's module map
# (generated in X.build/, or the package's own under include/).
flags=(-I "$bin/Modules")
for map in "$bin"/*.build/module.modulemap; do
  [[ -e $map ]] && flags+=(-Xcc "-fmodule-map-file=$map")
done
checkouts=$(dirname "$(dirname "$bin")")/checkouts
for include in "$checkouts"/*/Sources/*/include; do
  [[ -e $include/module.modulemap ]] && flags+=(-Xcc "-fmodule-map-file=$include/module.modulemap")
done
status=0
for file in "${files[@]}"; do
  if out=$(swiftc -typecheck -swift-version 6 "${flags[@]}" "$file" 2>&1); then
    echo "ok: $file ($(grep -c 'warning:.*deprecated' <<<"$out" || true) deprecation warnings)"
  else
    echo "$out" | grep -E 'error:' >&2
    echo "error: $file no longer compiles against this build" >&2
    status=1
  fi
done
exit $status

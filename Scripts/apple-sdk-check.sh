#!/usr/bin/env bash
# Compiles Pace's Apple-platform code on Linux against a real Apple SDK (its .swiftinterface files
# and C/Objective-C headers), not against the project's stand-ins. The project's copy of
# ../shared/apple-sdk/check.sh (whose README says how to get an SDK), widened to PaceTesting and
# PaceHTTPClient (its URLSession glue).
#
# usage: check.sh [options] PROJECT SDK [SDK...]
#   PROJECT   a checkout of Pace (the folder holding Package.swift)
#   SDK       an extracted SDK folder: iPhoneOS*.sdk, MacOSX*.sdk, AppleTVOS*.sdk, WatchOS*.sdk
# options:
#   --configs LIST   debug, release or debug,release (default: debug)
#   --no-catalyst    with a MacOSX SDK, skip the Mac Catalyst pass (done by default when the SDK
#                    has System/iOSSupport)
#   --keep           keep the build folder (objects, .swiftmodules, full compiler logs)
# environment:
#   SWIFTC                 the compiler (default: swiftc on PATH); needs to be at least as new as
#                          the compiler that wrote the SDK's interfaces
#   PACE_APPLE_SDK_CACHE   module cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/pace-apple-sdk-check);
#                          the first run against an SDK builds its modules there (1-2 min)
#
# Every module is compiled as SwiftPM would (language mode 6, the package's upcoming features,
# -package-name, -DSWIFT_PACKAGE; debug: -Onone -DDEBUG -enable-testing; release: -O), with -c
# -wmo: to object code, so that the SIL diagnostics (Swift 6 region isolation, `sending`,
# definite initialisation, exclusivity) run too, not only the type checker. The deployment
# target is the package's minimum for the platform, read from Package.swift.
#
# Prints the diagnostics in Pace's code (paths relative to PROJECT), a line per module build, a
# "-- result: LABEL CONFIG: E errors, W warnings, S setup errors" line per target/config run, and
# a summary line last. Exit status: 0 clean (no error, no warning in Pace's code); 1 errors or
# warnings in Pace's code; 2 the SDK or the setup failed (usage, missing files, errors inside
# the SDK's own interfaces).
set -uo pipefail

usage() { sed -n '/^# usage:/,/^# Every module/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

configs=debug catalyst=1 keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --configs) configs=${2:-}; shift 2 ;;
    --configs=*) configs=${1#*=}; shift ;;
    --no-catalyst) catalyst=0; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) echo "check.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
  esac
done
if [[ $# -lt 2 ]]; then usage >&2; exit 2; fi
project=$(cd "$1" 2>/dev/null && pwd) || { echo "check.sh: no folder $1" >&2; exit 2; }
shift
[[ -f $project/Package.swift && -d $project/Sources/Pace ]] || { echo "check.sh: $project is not a Pace checkout" >&2; exit 2; }
IFS=, read -r -a config_list <<<"$configs"
for c in "${config_list[@]}"; do [[ $c == debug || $c == release ]] || { echo "check.sh: unknown config $c" >&2; exit 2; }; done

swiftc=${SWIFTC:-$(command -v swiftc)} || true
[[ -n $swiftc && -x $swiftc ]] || { echo "check.sh: no swiftc (set SWIFTC)" >&2; exit 2; }
# Not resolved to its target: swiftc is a link to swift-driver, which takes its mode from its name.
toolchain_bin=$(cd "$(dirname "$(readlink -f "$swiftc")")" && pwd)
toolchain_lib=$(cd "$toolchain_bin/../lib/swift" && pwd) || { echo "check.sh: no lib/swift next to $swiftc" >&2; exit 2; }
clang=$toolchain_bin/clang
swift_version=$("$swiftc" --version 2>/dev/null | head -1)
version_tag=$(printf '%s' "$swift_version" | sed -n 's/.*version \([0-9][0-9.]*\).*/\1/p')

cache_root=${PACE_APPLE_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pace-apple-sdk-check}
mkdir -p "$cache_root" || exit 2

# A resource folder for Apple targets. The Linux toolchain's own (lib/swift) holds Linux module
# maps (Dispatch, os, CoreFoundation, Block...) that clash with the SDK's, and for an Apple triple
# the importer does not find the `SwiftShims` module map in lib/swift/shims (it searches no
# subfolders there), so the SDK's Swift.swiftinterface fails with "no such module 'SwiftShims'".
# This folder links only the compiler's clang headers, the shims, the plugin host and the API
# notes, and declares the shims' modules in a top-level module map.
resource=$cache_root/resource-$version_tag
mkdir -p "$resource"
for entry in clang shims host apinotes; do
  [[ -e $toolchain_lib/$entry ]] && ln -sfn "$toolchain_lib/$entry" "$resource/$entry"
done
cat >"$resource/module.modulemap" <<'MAP'
extern module SwiftShims "shims/module.modulemap"
extern module _SwiftConcurrencyShims "shims/module.modulemap"
extern module SwiftOverlayShims "shims/module.modulemap"
extern module _SynchronizationShims "shims/module.modulemap"
MAP

work=$(mktemp -d "${TMPDIR:-/tmp}/pace-apple-sdk-check.XXXXXX") || exit 2
if [[ $keep == 0 ]]; then trap 'rm -rf "$work"' EXIT; else echo "build folder: $work"; fi

# Swift settings from Package.swift: upcoming and experimental features, language mode.
features=()
while read -r f; do [[ -n $f ]] && features+=(-enable-upcoming-feature "$f"); done \
  < <(grep -o 'enableUpcomingFeature("[A-Za-z0-9_]*")' "$project/Package.swift" | sed 's/.*("\(.*\)")/\1/' | sort -u)
while read -r f; do [[ -n $f ]] && features+=(-enable-experimental-feature "$f"); done \
  < <(grep -o 'enableExperimentalFeature("[A-Za-z0-9_]*")' "$project/Package.swift" | sed 's/.*("\(.*\)")/\1/' | sort -u)
language_mode=6
grep -q 'swiftLanguageModes: *\[ *\.v5' "$project/Package.swift" && language_mode=5

# The package's minimum deployment target for a platform (SwiftPM's default where it names none).
deployment_target() {
  local name=$1 default=$2 v
  v=$(grep -o "\.$name(\.v[0-9_]*)" "$project/Package.swift" | head -1 | sed 's/.*(\.v\([0-9_]*\))/\1/; s/_/./g')
  [[ -z $v ]] && v=$(grep -o "\.$name(\"[0-9.]*\")" "$project/Package.swift" | head -1 | sed 's/.*("\(.*\)")/\1/')
  [[ -z $v ]] && v=$default
  [[ $v == *.* ]] || v=$v.0
  echo "$v"
}

# The first architecture the SDK's Swift.swiftmodule has an interface for, given a triple suffix.
sdk_arch() {
  local dir=$1 suffix=$2 arch
  for arch in arm64 arm64e x86_64; do
    [[ -f $dir/Swift.swiftmodule/$arch-$suffix.swiftinterface ]] && { echo "$arch"; return; }
  done
}

relativize() { sed "s|$project/||g"; }

# Pace's modules an SDK can compile, and what each needs, in build order. PaceTesting is
# compiled without its files that import XCTest or Testing (those live in Xcode's platform
# folders, not in an SDK): a stand-in for their internal reporting function takes their place
# (see pacetesting_shim below), so every other file of the product users link into their tests is
# checked at the minimums.
# PaceHTTPClient (its URLSession glue) needs swift-http-structured-headers' parser and
# swift-metrics' API (CoreMetrics), compiled from the checkouts SwiftPM resolved (`swift package
# resolve` makes them); their own diagnostics are not Pace's and are not counted.
modules=(Pace PaceMarbles PaceTesting PaceUI PaceCombine PaceObservation PaceSwiftUI RawStructuredFieldValues CoreMetrics PaceHTTPClient)
declare -A needs=([Pace]=CPaceSupport [PaceMarbles]=Pace [PaceTesting]=PaceMarbles [PaceUI]=Pace [PaceCombine]=Pace [PaceObservation]=Pace [PaceSwiftUI]=Pace [RawStructuredFieldValues]=none [CoreMetrics]=none [PaceHTTPClient]=RawStructuredFieldValues)
declare -A source_dirs=([RawStructuredFieldValues]=.build/checkouts/swift-http-structured-headers/Sources/RawStructuredFieldValues [CoreMetrics]=.build/checkouts/swift-metrics/Sources/CoreMetrics)

# The declarations of PaceTesting's XCTest/Testing files that its other files use, without those
# frameworks: the same signatures, bodies that do nothing (this compiles, it never runs).
pacetesting_shim() {
  cat <<'SWIFT'
func reportFailure(_ message: String, at location: FailureLocation) {}
SWIFT
}

total_errors=0 total_warnings=0 setup_errors=0 builds=0 clean_builds=0 runs=0
started=$(date +%s)

# check_target SDK TRIPLE LABEL CONFIG [extra swiftc flags...]
check_target() {
  local sdk=$1 triple=$2 label=$3 config=$4; shift 4
  local extra=("$@") dir="$work/$label-$config" cache="$cache_root/$(basename "$sdk")-$version_tag"
  local cfg_flags m status line summary="" run_errors=0 run_warnings=0 run_setup=0 t0 log
  declare -A result=()
  mkdir -p "$dir" "$cache"
  runs=$((runs + 1))
  case $config in
    debug) cfg_flags=(-Onone -DDEBUG -enable-testing) ;;
    release) cfg_flags=(-O) ;;
  esac
  echo "== $label $triple $config"

  # CPaceSupport: its C file for the target, and a module map for the Swift modules.
  if [[ -d $project/Sources/CPaceSupport/include ]]; then
    {
      echo "module CPaceSupport {"
      for h in "$project"/Sources/CPaceSupport/include/*.h; do echo "  header \"$h\""; done
      echo "  export *"
      echo "}"
    } >"$dir/module.modulemap"
    local c_errors=0
    for c in "$project"/Sources/CPaceSupport/*.c; do
      [[ -f $c ]] || continue
      log=$dir/CPaceSupport.log
      "$clang" -fsyntax-only -fno-color-diagnostics -target "$triple" -isysroot "$sdk" "${extra[@]/#-Fsystem/-iframework}" \
        -I "$project/Sources/CPaceSupport/include" "$c" >>"$log" 2>&1 || c_errors=$((c_errors + 1))
    done
    if [[ -f $dir/CPaceSupport.log ]]; then
      local ce cw
      ce=$(grep -cE '^[^ ].*:[0-9]+:[0-9]+: error:' "$dir/CPaceSupport.log")
      cw=$(grep -cE '^[^ ].*:[0-9]+:[0-9]+: warning:' "$dir/CPaceSupport.log")
      grep -E '^[^ ].*:[0-9]+:[0-9]+: (error|warning):' "$dir/CPaceSupport.log" | relativize | sed 's/^/  /'
      run_errors=$((run_errors + ce)); run_warnings=$((run_warnings + cw))
      builds=$((builds + 1))
      if [[ $c_errors -eq 0 && $ce -eq 0 && $cw -eq 0 ]]; then result[CPaceSupport]=ok; clean_builds=$((clean_builds + 1))
      elif [[ $c_errors -eq 0 && $ce -eq 0 ]]; then result[CPaceSupport]="ok ($cw warnings)"
      else result[CPaceSupport]=FAILED; fi
    fi
    summary+="CPaceSupport ${result[CPaceSupport]:-none}, "
  fi

  for m in "${modules[@]}"; do
    local source_dir=$project/${source_dirs[$m]:-Sources/$m}
    [[ -d $source_dir ]] || { summary+="$m absent, "; result[$m]=blocked; continue; }
    local dep=${needs[$m]}
    if [[ ${result[$dep]:-ok} == FAILED || ${result[$dep]:-ok} == blocked ]]; then
      result[$m]=blocked; summary+="$m blocked, "; continue
    fi
    local sources=()
    while IFS= read -r -d '' s; do
      # XCTest and Testing are not in an SDK (see pacetesting_shim).
      if [[ $m == PaceTesting ]] && grep -qE '^import (XCTest|Testing)$' "$s"; then continue; fi
      sources+=("$s")
    done < <(find "$source_dir" -name '*.swift' -print0 | sort -z)
    if [[ $m == PaceTesting ]]; then
      pacetesting_shim >"$dir/PaceTestingShim.swift"
      sources+=("$dir/PaceTestingShim.swift")
    fi
    log=$dir/$m.log
    t0=$(date +%s)
    "$swiftc" -c -wmo -parse-as-library -module-name "$m" -o "$dir/$m.o" \
      -emit-module -emit-module-path "$dir/$m.swiftmodule" \
      -swift-version "$language_mode" "${features[@]}" -package-name pace -DSWIFT_PACKAGE "${cfg_flags[@]}" \
      -target "$triple" -sdk "$sdk" -resource-dir "$resource" -module-cache-path "$cache" \
      -I "$dir" -Xcc -fmodule-map-file="$dir/module.modulemap" -no-color-diagnostics -diagnostic-style llvm \
      "${extra[@]}" "${sources[@]}" >"$log" 2>&1
    status=$?
    local secs=$(( $(date +%s) - t0 ))
    # First lines of diagnostics only (not the excerpts under them); Pace's vs the SDK's.
    local mine sdk_side e w
    # "failed to build module X" (an SDK interface the compiler could not build) is the setup's
    # fault even where it is reported at Pace's `import X`.
    mine=$(grep -E '^[^ ].*:[0-9]+:[0-9]+: (error|warning):' "$log" | grep -F "$project/" | grep -vF "$project/.build/" \
      | grep -v ': error: failed to build module' | sort -u | relativize)
    sdk_side=$({
      grep -E '^[^ ].*:[0-9]+:[0-9]+: error:' "$log" | grep -vF "$project/"
      grep -E '^[^ ].*:[0-9]+:[0-9]+: error: failed to build module' "$log" | grep -F "$project/"
    } | sort -u | relativize)
    e=$(printf '%s' "$mine" | grep -c ': error:')
    w=$(printf '%s' "$mine" | grep -c ': warning:')
    [[ -n $mine ]] && printf '%s\n' "$mine" | sed 's/^/  /'
    builds=$((builds + 1))
    if [[ -n $sdk_side ]]; then
      run_setup=$((run_setup + $(printf '%s\n' "$sdk_side" | wc -l)))
      printf '%s\n' "$sdk_side" | head -5 | sed 's/^/  [sdk] /'
    fi
    run_errors=$((run_errors + e)); run_warnings=$((run_warnings + w))
    if [[ $status -eq 0 && $e -eq 0 && $w -eq 0 ]]; then
      result[$m]=ok; clean_builds=$((clean_builds + 1)); summary+="$m ok ${secs}s, "
    elif [[ $status -eq 0 && $e -eq 0 ]]; then
      result[$m]="ok"; summary+="$m $w warnings ${secs}s, "
    else
      result[$m]=FAILED; summary+="$m FAILED ($e errors) ${secs}s, "
      if [[ $e -eq 0 && -z $sdk_side ]]; then
        run_setup=$((run_setup + 1)); echo "  [compiler] $m: exit status $status; log tail:"; tail -5 "$log" | sed 's/^/    /'
      fi
    fi
  done
  echo "   ${summary%, }"
  # One line a run, for scripts (other scripts read it): label, config, counts in Pace's code, setup errors.
  echo "-- result: $label $config: $run_errors errors, $run_warnings warnings, $run_setup setup errors"
  total_errors=$((total_errors + run_errors)); total_warnings=$((total_warnings + run_warnings))
  setup_errors=$((setup_errors + run_setup))
}

labels=()
for sdk_arg in "$@"; do
  sdk=$(cd "$sdk_arg" 2>/dev/null && pwd) || { echo "check.sh: no SDK folder $sdk_arg" >&2; setup_errors=$((setup_errors + 1)); continue; }
  settings=$sdk/SDKSettings.json
  [[ -f $settings ]] || { echo "check.sh: $sdk has no SDKSettings.json" >&2; setup_errors=$((setup_errors + 1)); continue; }
  canonical=$(grep -o '"CanonicalName" *: *"[^"]*"' "$settings" | head -1 | sed 's/.*"\([^"]*\)"$/\1/')
  case $canonical in
    iphoneos*) os=ios env="" platform=iOS def=12.0 ;;
    iphonesimulator*) os=ios env=-simulator platform=iOS def=12.0 ;;
    macosx*) os=macos env="" platform=macOS def=10.13 ;;
    appletvos*) os=tvos env="" platform=tvOS def=12.0 ;;
    appletvsimulator*) os=tvos env=-simulator platform=tvOS def=12.0 ;;
    watchos*) os=watchos env="" platform=watchOS def=4.0 ;;
    watchsimulator*) os=watchos env=-simulator platform=watchOS def=4.0 ;;
    xros*) os=xros env="" platform=visionOS def=1.0 ;;
    xrsimulator*) os=xros env=-simulator platform=visionOS def=1.0 ;;
    *) echo "check.sh: unknown SDK kind '$canonical' in $settings" >&2; setup_errors=$((setup_errors + 1)); continue ;;
  esac
  # Copies of macOS SDKs made with git lose the frameworks' symbolic links (Modules, Headers ->
  # Versions/Current/...): then no framework module is found. extract-sdk.sh restores them.
  if [[ $os == macos && ! -e $sdk/System/Library/Frameworks/Foundation.framework/Modules ]]; then
    echo "check.sh: $sdk: Foundation.framework/Modules is missing (framework links lost in the copy?); extract it with extract-sdk.sh" >&2
    setup_errors=$((setup_errors + 1)); continue
  fi
  [[ -f $sdk/usr/include/os.apinotes ]] || echo "check.sh: warning: $sdk has no usr/include/os.apinotes (an incomplete copy?): 'os' will not import as Swift expects" >&2
  arch=$(sdk_arch "$sdk/usr/lib/swift" "apple-$os$env")
  [[ -n $arch ]] || { echo "check.sh: $sdk has no usr/lib/swift/Swift.swiftmodule interface for apple-$os$env" >&2; setup_errors=$((setup_errors + 1)); continue; }
  dt=$(deployment_target "$platform" "$def")
  for config in "${config_list[@]}"; do
    check_target "$sdk" "$arch-apple-$os$dt$env" "$canonical" "$config"
    labels+=("$canonical $arch-apple-$os$dt$env $config")
  done
  # Mac Catalyst: the iOS glue on a Mac, from the macOS SDK's iOSSupport folder. The Linux
  # driver does not add iOSSupport's frameworks itself (Xcode's does): without them
  # `canImport(UIKit)` is false and `import SwiftUI` finds only SwiftUI's Objective-C module.
  if [[ $os == macos && $catalyst == 1 && -d $sdk/System/iOSSupport ]]; then
    carch=$(sdk_arch "$sdk/System/iOSSupport/usr/lib/swift" "apple-ios-macabi")
    cdt=$(deployment_target iOS 13.1)
    # Mac Catalyst starts at iOS 13.1.
    [[ $(printf '%s\n13.1\n' "$cdt" | sort -V | head -1) != 13.1 ]] && cdt=13.1
    if [[ -n $carch ]]; then
      for config in "${config_list[@]}"; do
        check_target "$sdk" "$carch-apple-ios$cdt-macabi" "$canonical-catalyst" "$config" \
          -Fsystem "$sdk/System/iOSSupport/System/Library/Frameworks"
        labels+=("$canonical $carch-apple-ios$cdt-macabi $config")
      done
    else
      echo "check.sh: $sdk has System/iOSSupport but no System/iOSSupport/usr/lib/swift/Swift.swiftmodule interface for apple-ios-macabi: Mac Catalyst not checked" >&2
      setup_errors=$((setup_errors + 1))
    fi
  fi
done

elapsed=$(( $(date +%s) - started ))
if [[ $setup_errors -gt 0 ]]; then verdict=SETUP-FAILED code=2
elif [[ $total_errors -gt 0 || $total_warnings -gt 0 ]]; then verdict=FAILED code=1
else verdict=CLEAN code=0; fi
[[ $runs -eq 0 && $code -eq 0 ]] && { verdict=SETUP-FAILED; code=2; }
echo "apple-sdk-check: $verdict: $runs target/config runs ($(IFS=';'; echo "${labels[*]}")), $clean_builds/$builds module builds clean, $total_errors errors and $total_warnings warnings in Pace's code, $setup_errors SDK/setup errors, ${elapsed}s ($swift_version)"
exit $code

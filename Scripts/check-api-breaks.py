#!/usr/bin/env python3
"""Fails when the library products break a user's code in a way CHANGELOG.md does not announce.

Runs `swift package diagnose-api-breaking-changes` against the last release's commit (named in
.ci/api-baseline: `VERSION COMMIT`) and compares each breakage it reports with the ones that
CHANGELOG.md announces. A breakage is announced by an HTML comment under the heading of a version
newer than the baseline that may break (a new major version, or before 1.0 a new minor one):

    ## 0.2.0 - 2026-11-27
    ...
    <!-- api-break: func RateLimiter.tryAcquire(_:) has removed default argument from parameter 0 -->

The comment holds the digester's message after "API breakage: ", exactly, beside the sentence
that tells users what changed. Breakages of `package` declarations (visible to this package's
own modules only, never to users: `isInternal` in the baseline's dump) are reported and ignored.

What is compared, in two runs of the digester:

- The products without traits (PRODUCTS), built in .build as `swift build` builds them.
- The server products behind traits (SERVER_PRODUCTS), built in .build-server with every trait
  and `-warnings-as-errors`, as .ci/run's server step builds them (so that step reuses the build).
  The digester builds its baseline with the package's default traits only (SwiftPM 6.3 passes no
  trait configuration to the baseline's graph), where these modules are empty. So this script
  makes their baselines itself: it extracts the baseline's sources (`git archive`), builds them
  with the baseline's traits and dumps each module with `swift-api-digester -dump-sdk` and the
  search paths SwiftPM gives it; the digester then finds them in --baseline-dir and only compares.
  The first run builds the baseline with its server dependencies (Vapor, Hummingbird,
  postgres-nio: 13 minutes on 2 cores); later runs reuse the dumps.

A product the baseline does not have (new since the baseline, such as PaceHTTPClient against
0.3.0) is skipped, with a line saying so: nothing to compare yet, and its absent dump would make
the digester check the baseline out again on every run.

The baselines' dumps are kept in .build/api-breaks/VERSION-COMMIT/ (per release, so a new
baseline makes new dumps), and the digester's output in .build/api-breaks/VERSION-COMMIT/digester.log
(digester-no-server.log after `--no-server`). Times on 2 cores: the products without traits, the
first time (the baseline checked out, built and dumped by the digester), about 2 minutes plus the
current build; with the dumps kept and the build warm, 20 seconds; the server products with
.build-server warm, about 2 minutes. `--log` re-reads a kept output at once, without building.

usage: check-api-breaks.py [--log FILE] [--no-server]
  --log FILE    read the digester's output from FILE (for example the kept digester.log) instead of
                running it: re-checks CHANGELOG.md's announcements at once, and tests this script
  --no-server   compare the products without traits only (no .build-server build)
"""
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCTS = ["Pace", "PaceTesting", "PaceUI", "PaceCombine", "PaceObservation", "PaceSwiftUI", "PaceHTTPClient"]
# The server products and the traits that build them; a trait the baseline does not declare is
# left out of its build (its product is not in the baseline either).
SERVER_PRODUCTS = ["PacePostgres", "PaceHummingbird", "PaceVapor", "PaceAsyncHTTPClient"]
SERVER_TRAITS = ["PostgreSQL", "Hummingbird", "Vapor", "AsyncHTTPClient"]
SERVER_SCRATCH = ".build-server"


def parse_version(text):
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(part) for part in match.groups()) if match else None


def may_break(version, baseline):
    """A version that may break the baseline's users: a new major, or before 1.0 a new minor."""
    if version[0] != baseline[0]:
        return version[0] > baseline[0]
    return baseline[0] == 0 and version[1] > baseline[1]


def announced_breaks(changelog, baseline):
    """The breakages announced under versions newer than the baseline that may break."""
    announced, errors = set(), []
    version = None
    for number, line in enumerate(changelog.splitlines(), 1):
        heading = re.match(r"## +(\S+)", line)
        if heading:
            version = parse_version(heading.group(1))
            if version == baseline:
                break
            continue
        for message in re.findall(r"<!-- api-break: (.+?) -->", line):
            if version is None:
                errors.append(f"CHANGELOG.md:{number}: a break announced outside a version heading "
                              f"(## X.Y.Z): {message}")
            elif not may_break(version, baseline):
                errors.append(f"CHANGELOG.md:{number}: {'.'.join(map(str, version))} may not break "
                              f"{'.'.join(map(str, baseline))} (a new minor before 1.0, else a new major): {message}")
            else:
                announced.add(message.strip())
    return announced, errors


def declaration_index(dump):
    """Each declaration of a baseline's dump by its qualified printed name (`Batcher.flush()`,
    `Batcher.bufferedCount.Get()`, `RateLimit.Policy`), with whether it is `package` (the dump's
    `isInternal`, on it or on a declaration that holds it). Overloads with one printed name are
    `package` only if all are."""
    index = {}

    def walk(node, path, internal):
        internal = internal or bool(node.get("isInternal"))
        name = node.get("printedName")
        if node.get("kind") not in (None, "Root", "TypeNominal", "TypeNameAlias", "TypeFunc", "Import") and name:
            path = path + [name]
            key = ".".join(path)
            index[key] = index.get(key, True) and internal
        for child in node.get("children", []) + node.get("accessors", []):
            if child.get("kind", "").startswith("Type") and child.get("kind") != "TypeDecl":
                continue
            walk(child, path, internal)

    walk(json.loads(dump.read_text())["ABIRoot"], [], False)
    return index


def breaks_by_module(output):
    """(module, message) for each breakage in the digester's output, by the section it is in."""
    module, found = None, []
    for line in output.splitlines():
        section = re.search(r"breaking changes? detected in (\w+):", line)
        if section:
            module = section.group(1)
        message = re.search(r"API breakage: (.+)", line)
        if message:
            found.append((module, message.group(1).strip()))
    return found


def package_only(module, message, indexes):
    """Whether the breakage is of a declaration that was `package` at the baseline (visible to this
    package's own modules only), read from the baseline's dump of the module; False when unknown."""
    index = indexes.get(module)
    if index is None:
        return False
    subject = message.split(" has ", 1)[0].split(" ", 1)[-1]
    return index.get(subject, False)


def baseline_manifest(commit):
    return subprocess.run(["git", "show", f"{commit}:Package.swift"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


def baseline_traits(commit, traits):
    """The traits among `traits` that the baseline's Package.swift declares."""
    manifest = baseline_manifest(commit)
    return [name for name in traits if re.search(r'\.trait\(\s*name:\s*"' + re.escape(name) + '"', manifest)]


def baseline_modules(commit, products):
    """The modules of the products among `products` that the baseline declares, and the products it
    does not have."""
    manifest = baseline_manifest(commit)
    modules, absent = [], []
    for product in products:
        library = re.search(r'\.library\(\s*name:\s*"' + re.escape(product) + r'",\s*targets:\s*\[([^\]]*)\]',
                            manifest)
        if library:
            modules += [name for name in re.findall(r'"([^"]+)"', library.group(1)) if name not in modules]
        else:
            absent.append(product)
    return modules, absent


def run(command, **options):
    print("$ " + " ".join(str(part) for part in command), flush=True)
    return subprocess.run(command, cwd=options.pop("cwd", ROOT), capture_output=True, text=True, **options)


def has_symbols(dump):
    """Whether a dump holds declarations, not only imports: the digester's own baseline of a
    trait-gated module, built without its trait, holds imports only (and compares clean)."""
    try:
        children = json.loads(dump.read_text()).get("ABIRoot", {}).get("children", [])
    except (OSError, ValueError):
        return False
    return any(child.get("kind") != "Import" for child in children)


def dump_server_baselines(commit, traits, modules, digests, work):
    """Dumps the baseline's trait-gated modules into digests/COMMIT/MODULE.json, as the digester
    would if it built its baseline with traits: sources from `git archive`, built with `traits`."""
    target = digests / commit
    missing = [module for module in modules if not has_symbols(target / f"{module}.json")]
    if not missing:
        return None
    source = work / "source"
    if not (source / "Package.swift").exists():
        source.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    print(f"building the baseline's server modules with {','.join(traits)} in {source.relative_to(ROOT)} "
          f"(the first time: their dependencies too)", flush=True)
    build = ["swift", "build", "--package-path", str(source), "--scratch-path", str(source / ".build"),
             "--traits", ",".join(traits)]
    for module in missing:
        built = run(build + ["--target", module])
        if built.returncode != 0:
            return f"building the baseline's {module} failed:\n{built.stdout}{built.stderr}"
    bin_path = Path(run(build + ["--show-bin-path"]).stdout.strip().splitlines()[-1])
    includes = sorted((source / ".build" / "checkouts").glob("*/Sources/*/include")) + sorted(
        source.glob("Sources/*/include"))
    return dump_modules(bin_path, includes, missing, target)


def dump_modules(bin_path, includes, modules, target):
    """`swift-api-digester -dump-sdk` of each module built in bin_path, with the search paths SwiftPM
    gives the API tools: the build directory, the Swift modules, each C module's generated module map
    and the C targets' include directories (`includes`)."""
    search = ["-I", str(bin_path), "-I", str(bin_path / "Modules")]
    search += [part for module_map in sorted(bin_path.glob("*.build/module.modulemap"))
               for part in ("-I", str(module_map.parent))]
    search += [part for include in includes for part in ("-I", str(include))]
    tool = Path(shutil.which("swift")).resolve().parent / "swift-api-digester"
    target.mkdir(parents=True, exist_ok=True)
    for module in modules:
        dump = target / f"{module}.json"
        print(f"$ swift-api-digester -dump-sdk -module {module} -o {dump} (SwiftPM's search paths)", flush=True)
        dumped = subprocess.run([str(tool), "-dump-sdk", "-compiler-style-diags", *search, "-module", module,
                                 "-o", str(dump)], capture_output=True, text=True)
        if dumped.returncode != 0 or not has_symbols(dump):
            dump.unlink(missing_ok=True)
            return f"dumping the baseline's {module} failed:\n{dumped.stdout}{dumped.stderr}"
    return None


def diagnose(commit, version_text, products, digests, options):
    """One run of the digester over the modules of `products` that the baseline has; its output.
    `--targets` rather than `--products`: a module a product gained since has nothing to compare,
    and its absent dump would make the digester check the baseline out and build it on every run."""
    modules, absent = baseline_modules(commit, products)
    for product in absent:
        print(f"skipped: {product} is not a product of {version_text}: nothing to compare yet")
    if not modules:
        return ""
    started = time.monotonic()
    result = run(["swift", "package", *options, "diagnose-api-breaking-changes", commit, "--targets", *modules,
                  "--baseline-dir", str(digests)])
    print(f"diagnose-api-breaking-changes over {', '.join(modules)}: {time.monotonic() - started:.0f} s", flush=True)
    output = result.stdout + result.stderr
    if result.returncode != 0 and "API breakage" not in output:
        print(output, file=sys.stderr)
        raise SystemExit("error: diagnose-api-breaking-changes failed")
    return output


def main():
    version_text, commit = (ROOT / ".ci/api-baseline").read_text().split()[:2]
    baseline = parse_version(version_text)
    work = ROOT / ".build" / "api-breaks" / f"{version_text}-{commit[:7]}"
    if "--log" in sys.argv:
        output = Path(sys.argv[sys.argv.index("--log") + 1]).read_text()
    else:
        work.mkdir(parents=True, exist_ok=True)
        output = diagnose(commit, version_text, PRODUCTS, work / "digests", [])
        if "--no-server" not in sys.argv:
            traits = baseline_traits(commit, SERVER_TRAITS)
            modules, _ = baseline_modules(commit, SERVER_PRODUCTS)
            if modules:
                failure = dump_server_baselines(commit, traits, modules, work / "server-digests", work)
                if failure:
                    print(failure, file=sys.stderr)
                    return 2
            output += diagnose(commit, version_text, SERVER_PRODUCTS, work / "server-digests",
                               ["--scratch-path", SERVER_SCRATCH, "--traits", ",".join(SERVER_TRAITS),
                                "-Xswiftc", "-warnings-as-errors"])
        # A run without the server products keeps its output apart, so that the whole run's stays.
        log = (work / ("digester-no-server.log" if "--no-server" in sys.argv else "digester.log")).relative_to(ROOT)
        (ROOT / log).write_text(output)
        print(f"the digester's output is kept in {log}: `{Path(__file__).relative_to(ROOT)} --log {log}` "
              f"re-checks CHANGELOG.md against it without building")
    found = breaks_by_module(output)
    breaks = [message for _, message in found]
    indexes = {dump.stem: declaration_index(dump) for dump in sorted(work.glob(f"*digests/{commit}/*.json"))}
    announced, errors = announced_breaks((ROOT / "CHANGELOG.md").read_text(), baseline)
    unannounced = []
    for module, message in found:
        if message in announced:
            print(f"announced: {message}")
        elif package_only(module, message, indexes):
            print(f"package-only, not API: {message}")
        else:
            unannounced.append(message)
    for message in sorted(announced - set(breaks)):
        print(f"note: announced but not reported (no longer a break?): {message}")
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    for message in unannounced:
        print(f"error: not announced in CHANGELOG.md: {message}\n"
              f"  add `<!-- api-break: {message} -->` under the new version's heading, beside a "
              f"sentence for users, or keep the old spelling (deprecated)", file=sys.stderr)
    print(f"{len(breaks)} breakages since {version_text} ({commit[:7]}): "
          f"{len(breaks) - len(unannounced)} announced or package-only, {len(unannounced)} not announced")
    return 1 if unannounced or errors else 0


if __name__ == "__main__":
    sys.exit(main())

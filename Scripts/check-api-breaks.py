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
own modules only, never to users) are reported and ignored.

usage: check-api-breaks.py [--log FILE]   (--log: read the digester's output from FILE instead of
running it; for testing this script)
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCTS = ["Pace", "PaceTesting", "PaceUI", "PaceCombine", "PaceObservation", "PaceSwiftUI"]


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


def package_only(message, commit):
    """Whether the breakage is of a declaration that was `package` at the baseline: the type it
    names, or the member (`func RateLimiter.waitUntilWaitingCount(_:)`: either name)."""
    path = re.match(r"(?:\w+ )*?(?:func|struct|enum|class|protocol|actor|var|typealias|init|subscript|case|"
                    r"associatedtype|let) ([A-Za-z_][A-Za-z0-9_.]*)", message)
    if not path:
        return False
    for name in path.group(1).split("."):
        pattern = (r"^\s*(@\w+(\([^)]*\))?\s+)*package\s+(final\s+|static\s+|mutating\s+|nonisolated\s+)*"
                   r"(struct|enum|class|protocol|actor|typealias|func|var|let|init)\s+" + re.escape(name) + r"\b")
        found = subprocess.run(["git", "grep", "-qE", pattern, commit, "--", "Sources"], cwd=ROOT)
        if found.returncode == 0:
            return True
    return False


def main():
    version_text, commit = (ROOT / ".ci/api-baseline").read_text().split()[:2]
    baseline = parse_version(version_text)
    if "--log" in sys.argv:
        output = Path(sys.argv[sys.argv.index("--log") + 1]).read_text()
    else:
        run = subprocess.run(
            ["swift", "package", "diagnose-api-breaking-changes", commit, "--products", *PRODUCTS],
            cwd=ROOT, capture_output=True, text=True)
        output = run.stdout + run.stderr
        if run.returncode != 0 and "API breakage" not in output:
            print(output, file=sys.stderr)
            print("error: diagnose-api-breaking-changes failed", file=sys.stderr)
            return 2
    breaks = [m.strip() for m in re.findall(r"API breakage: (.+)", output)]
    announced, errors = announced_breaks((ROOT / "CHANGELOG.md").read_text(), baseline)
    unannounced = []
    for message in breaks:
        if message in announced:
            print(f"announced: {message}")
        elif package_only(message, commit):
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

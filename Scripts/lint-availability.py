#!/usr/bin/env python3
"""Fails on a use of API newer than the package's minimums (macOS 13, iOS 16, tvOS 16, watchOS 9)
outside an availability guard, in every Swift file of the repository's packages.

Swift on Linux ignores Apple availability, so nothing else here notices such a use; this lint is
the cheap guard CI runs on every change (../shared/apple-sdk/check.sh, against a real SDK, is the
thorough one). It knows the API Pace could reach for (the list below) and accepts a use that is:

- inside a declaration marked `@available(macOS 14 or later, ...)` (or iOS 17 or later), or a
  block of `if #available(...)` / after `guard #available(...)` with such versions;
- in a branch that never compiles for Apple platforms: `#if os(Linux)`, `#if !canImport(Darwin)`,
  or the `#else` of `#if canImport(Darwin)`;
- in a comment.

usage: lint-availability.py [PATH...]   (default: Sources Tests Benchmarks Examples Fuzz)
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# API newer than macOS 13 / iOS 16, with the systems that introduced it.
NEWER_API = [
    (r"\bMutex\s*[<(]", "Synchronization.Mutex (macOS 15, iOS 18)"),
    (r"\bAtomic\s*[<(]", "Synchronization.Atomic (macOS 15, iOS 18)"),
    (r"\bTaskExecutor\b", "TaskExecutor (macOS 15, iOS 18)"),
    (r"\bExecutorJob\b", "ExecutorJob (macOS 14, iOS 17)"),
    (r"\bwithTaskExecutorPreference\b", "withTaskExecutorPreference (macOS 15, iOS 18)"),
    (r"\bglobalConcurrentExecutor\b", "globalConcurrentExecutor (macOS 15, iOS 18)"),
    (r"\bwithObservationTracking\b", "withObservationTracking (macOS 14, iOS 17)"),
    (r"@Observable\b", "@Observable (macOS 14, iOS 17)"),
    (r"\bObservationRegistrar\b", "ObservationRegistrar (macOS 14, iOS 17)"),
    (r"\bObservations\s*[{(]", "Observations (macOS 26, iOS 26)"),
    (r"\bwith(Throwing)?DiscardingTaskGroup\b", "withDiscardingTaskGroup (macOS 14, iOS 17)"),
    (r"\bInlineArray\b", "InlineArray (macOS 26, iOS 26)"),
    (r"\b(Raw)?Span\s*<", "Span (macOS 26, iOS 26)"),
    (r"\bTask\.immediate\b|\bTask\s*\.\s*immediate\b", "Task.immediate (macOS 26, iOS 26)"),
]
NEWER = [(re.compile(pattern), name) for pattern, name in NEWER_API]

GUARD_VERSION = re.compile(r"\b(macOS|iOS|tvOS|watchOS|visionOS)\s+(\d+)")
MINIMUM = {"macOS": 13, "iOS": 16, "tvOS": 16, "watchOS": 9, "visionOS": 1}


def guards_newer(text):
    """Whether an availability list guards API newer than the minimums (macOS or iOS above them)."""
    versions = {name: int(major) for name, major in GUARD_VERSION.findall(text)}
    if not versions:
        return False
    return any(versions.get(name, 0) > MINIMUM[name] for name in ("macOS", "iOS"))


def strip_comments(line, in_block):
    """The code of a line without its comments and string literals; whether a block comment goes on."""
    out, i = [], 0
    while i < len(line):
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i, in_block = end + 2, False
        elif line.startswith("//", i):
            break
        elif line.startswith("/*", i):
            in_block, i = True, i + 2
        elif line[i] == '"':
            end = i + 1
            while end < len(line) and line[end] != '"':
                end += 2 if line[end] == "\\" else 1
            out.append('""')
            i = end + 1
        else:
            out.append(line[i])
            i += 1
    return "".join(out), in_block


def lint(path):
    problems = []
    in_block = False
    # #if stack: for each level, whether the current branch is Apple-free.
    conditions = []
    # Brace scopes: whether each is guarded.
    scopes = [False]
    pending = False  # an @available / if #available whose body has not opened yet
    for number, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
        code, in_block = strip_comments(raw, in_block)
        stripped = code.strip()
        directive = re.match(r"#(if|elseif|else|endif)\b(.*)", stripped)
        if directive:
            kind, condition = directive.groups()
            linux_only = bool(re.search(r"os\(Linux\)|!\s*canImport\(Darwin\)", condition))
            if kind == "if":
                conditions.append({"linux": linux_only, "darwin_if": "canImport(Darwin)" in condition
                                   and "!" not in condition.split("canImport(Darwin)")[0][-2:]})
            elif kind in ("elseif", "else") and conditions:
                top = conditions[-1]
                top["linux"] = linux_only if kind == "elseif" else top.get("darwin_if", False)
            elif kind == "endif" and conditions:
                conditions.pop()
            continue
        apple_free = any(level["linux"] for level in conditions)
        if re.search(r"@available\s*\(", code) and guards_newer(code):
            pending = True
        if re.search(r"#available\s*\(", code) and guards_newer(code):
            if re.search(r"\bguard\b", code):
                scopes[-1] = True
            else:
                pending = True
        guarded = any(scopes) or pending or apple_free
        if not guarded:
            for pattern, name in NEWER:
                if pattern.search(code):
                    problems.append(f"{path.relative_to(ROOT)}:{number}: {name} outside an availability guard: "
                                    f"{raw.strip()}")
        for char in code:
            if char == "{":
                scopes.append(pending or scopes[-1])
                pending = False
            elif char == "}" and len(scopes) > 1:
                scopes.pop()
        # A guarded one-line declaration without a body (`@available(…) typealias …`) ends it.
        if pending and stripped and not stripped.startswith("@") and "{" not in code and not code.rstrip().endswith(
                ("(", ",", "->")) and re.search(r"\b(typealias|let|var|case)\b", code):
            pending = False
    return problems


# The lint's own cases, run by `--self-test` (CI runs it first): a lint that passes everything
# guards nothing.
SELF_TEST = {
    "let lock = Mutex<Int>(0)\n": 1,
    "// a Mutex<Int> in a comment\nlet s = \"Mutex<Int>(0)\"\n": 0,
    "@available(macOS 15, iOS 18, *)\nfinal class A {\n  let lock = Mutex<Int>(0)\n}\nlet b = Mutex<Int>(0)\n": 1,
    "@available(macOS 13, iOS 16, *)\nfinal class A {\n  let lock = Mutex<Int>(0)\n}\n": 1,
    "func f() {\n  if #available(macOS 15, iOS 18, *) {\n    _ = Mutex<Int>(0)\n  } else {\n    _ = 0\n  }\n"
    "  _ = Mutex<Int>(0)\n}\n": 1,
    "func f() {\n  guard #available(macOS 26, iOS 26, *) else { return }\n  _ = Task.immediate {}\n}\n": 0,
    "#if canImport(Darwin)\nimport os\n#else\nlet m = Mutex<Int>(0)\n#endif\nlet n = Mutex<Int>(0)\n": 1,
    "#if os(Linux)\nlet m = Mutex<Int>(0)\n#endif\n": 0,
    "@MainActor @Observable final class Model {}\n": 1,
    "@available(macOS 14, iOS 17, *)\n@MainActor @Observable final class Model {}\n": 0,
    "final class E: TaskExecutor {\n  func enqueue(_ job: consuming ExecutorJob) {}\n}\n": 2,
}


def self_test():
    import tempfile
    failures = 0
    with tempfile.TemporaryDirectory(dir=ROOT) as folder:
        for number, (source, expected) in enumerate(SELF_TEST.items()):
            path = Path(folder) / f"case{number}.swift"
            path.write_text(source)
            found = len(lint(path))
            if found != expected:
                failures += 1
                print(f"self-test: case {number} found {found}, expected {expected}:\n{source}", file=sys.stderr)
    print(f"availability lint self-test: {len(SELF_TEST)} cases, {failures} failing")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    roots = sys.argv[1:] or ["Sources", "Tests", "Benchmarks", "Examples", "Fuzz"]
    problems, files = [], 0
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.swift")):
            if any(part.startswith(".build") or part == ".swiftpm" for part in path.parts):
                continue
            files += 1
            problems += lint(path)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    print(f"availability lint: {files} files, {len(problems)} uses of newer API outside a guard")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

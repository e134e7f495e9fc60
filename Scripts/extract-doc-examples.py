#!/usr/bin/env python3
"""Turns every ```swift block of README.md and the DocC articles into Swift that the build compiles.

    Scripts/extract-doc-examples.py          # regenerate Tests/DocExamplesTests/Generated/
    Scripts/extract-doc-examples.py --check  # CI: fail if the generated files are stale

Why a generator rather than SwiftPM snippets: the examples stay where readers see them (README,
articles), they are edited like prose, and a stale copy is caught by `--check`; a snippet would
move the code out of the article into `Snippets/` and leave README's code unchecked.

Each block (with the blocks that continue it) becomes one file,
`Tests/DocExamplesTests/Generated/<Document>-<n>.swift`, in the `DocExamplesTests` test target,
and its declarations live in a namespace of their own, `struct DocExample_<Document>_<n>`:

- Why a namespace: articles are complete programs that declare their own `Item`, `SearchService`,
  `SearchModel`...; in one module those would clash with each other and with Context.swift.
  Inside the struct they shadow the module's names, and the article's code stays exactly as
  users copy it (no renaming). Protocols nest too (SE-0404, Swift 5.10; the struct is not
  generic). Only a block with a top-level `extension`, which cannot nest, is put at file scope as
  written; its names then share the module's scope (none does today).
- A block that declares tests (a line starting with `@Test` or `@Suite`), or only declarations,
  is compiled as written as the struct's members; its `@Test`s *run* with the other tests.
- Any other block is a fragment of app code: its top-level declarations (types, protocols,
  functions, with the attribute lines before them) become members of the struct, and its
  statements the body of `@MainActor func example() async throws`, so `let`s, calls, `try` and
  `await` all compile. The names such fragments assume (`api`, `searchField`, `tableView`, ...)
  are declared once in `Tests/DocExamplesTests/Context.swift`, with UIKit's stand-ins.
- Imports: a block that imports a server module (`PacePostgres`, `PaceHummingbird`,
  `PaceAsyncHTTPClient`, ...) is compiled only with its package trait on (`#if PostgreSQL`), as
  CI's server step builds it. A block that imports Foundation and uses URLSession also gets
  FoundationNetworking where it exists (Linux).
  `Combine`, `SwiftUI` and `PaceSwiftUI` become OpenCombine, the SwiftUI stand-in and
  PaceSwiftUI compiled against it where Apple's modules do not exist. A block with `import` lines
  (its own, or its context's) gets exactly those (it claims to be complete: a missing import is
  an error). A block without gets `Foundation`, `Pace`, `PaceTesting`, `Testing`,
  `Synchronization` and the UIKit stand-ins, as an app's file would have them.

Markers, an HTML comment on the line(s) just before the opening fence (invisible in DocC and on
GitHub):

- `<!-- example: continues -->`: the block goes on from the previous block of the document, in
  the same scope (split an example with prose, compile it whole).
- `<!-- example-context: SWIFT -->`: Swift code put before the block, in its scope (the names a
  fragment assumes that Context.swift does not declare). May span lines; its `import`s count as
  the block's.
- `<!-- example-in: SWIFT -->`: Swift code with a line `/* example */`, which the block replaces
  (indented as that line). For a fragment that is only valid inside something: view modifiers
  (`.task(id:) { ... }`) inside a view's `body`, calls on an object's properties inside a function
  that receives them. Its `import`s count as the block's.
- `<!-- example: not-compiled REASON -->`: not compiled, and reported on every run. For listings
  that are not code (declarations without bodies, a signature summary), for code that needs an
  Apple-only API with no stand-in here (the reason says which), or for a while, for an example of
  API that another branch is adding or fixing (the reason says which; remove it on merge).

In markers, write `\\@` for `@` at the start of a line (`\\@State private var draft = ""`): DocC
reads such a line as a directive, even inside an HTML comment, and fails the docs build.

A catalog reached through a symlinked target (`PaceSwiftUIOnStandIn` -> `PaceSwiftUI`) is read once.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "Tests" / "DocExamplesTests" / "Generated"
DEFAULT_IMPORTS = ["Foundation", "Pace", "PaceTesting", "PaceUI", "PaceUIOnStandIns", "Synchronization", "Testing",
                   "UIKitStandIn"]
FENCE = re.compile(r"^```swift[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"<!--\s*(example(?:-context|-in)?):?(.*?)-->", re.S)
PLACEHOLDER = "/* example */"
IMPORT = re.compile(r"^\s*import (\w+)\s*(//.*)?$")
FILE_SCOPE = re.compile(r"^extension\b", re.M)
DECLARATIONS = re.compile(r"^(@Test|@Suite|@MainActor @Test|@MainActor\s+@Suite)\b", re.M)


def documents():
    yield ROOT / "README.md"
    # A catalog reached through a symlinked target (PaceSwiftUIOnStandIn -> PaceSwiftUI) is the
    # same document: read it once, under its real target.
    for path in sorted((ROOT / "Sources").glob("*/*.docc/**/*.md")):
        if path.resolve() == path.absolute():
            yield path


def markers_before(text, start):
    """The example markers in the HTML comments that end just before `start` (blank lines allowed)."""
    found = []
    head = text[:start].rstrip()
    while head.endswith("-->"):
        open_at = head.rfind("<!--")
        match = MARKER.fullmatch(head[open_at:])
        if open_at < 0 or not match:
            break
        found.insert(0, (match.group(1), match.group(2).strip()))
        head = head[:open_at].rstrip()
    return found


def groups(path):
    """The document's examples: lists of (line, code, context) that compile together."""
    text = path.read_text()
    result, skipped = [], []
    for fence in FENCE.finditer(text):
        line = text.count("\n", 0, fence.start()) + 1
        code, context, continues, template = fence.group(1), [], False, None
        for kind, value in markers_before(text, fence.start()):
            value = value.replace("\\@", "@")   # `\@State`: DocC reads a line starting with `@` as a directive
            if kind == "example-context":
                context.append(value)
            elif kind == "example-in":
                if PLACEHOLDER not in value:
                    sys.exit(f"{path.relative_to(ROOT)}:{line}: 'example-in' has no {PLACEHOLDER} line")
                template = value
            elif value == "continues":
                continues = True
            elif value.startswith("not-compiled"):
                skipped.append(f"{path.relative_to(ROOT)}:{line}: {value}")
                code = None
            else:
                sys.exit(f"{path.relative_to(ROOT)}:{line}: unknown marker 'example: {value}'")
        if code is None:
            continue
        if template is not None:
            # The block takes the placeholder's indentation, so that its lines stay inside the template's.
            margin = re.search(r"^([ \t]*)" + re.escape(PLACEHOLDER), template, re.M).group(1)
            code = template.replace(margin + PLACEHOLDER, indent(code.strip("\n"), len(margin)))
        if continues:
            if not result:
                sys.exit(f"{path.relative_to(ROOT)}:{line}: 'example: continues' has no block to continue")
            result[-1].append((line, code, context))
        else:
            result.append([(line, code, context)])
    return result, skipped


def swift_name(path):
    name = path.stem if path.name != "README.md" else "README"
    return re.sub(r"[^A-Za-z0-9]", "", name)


def render(path, index, group):
    source = str(path.relative_to(ROOT))
    lines = ", ".join(str(line) for line, _, _ in group)
    body, imports = [], []
    for _, code, _ in group:
        for line in code.splitlines():
            (imports if IMPORT.match(line) else body).append(line)
    # Context goes first, in the order the blocks give it; its imports join the block's.
    context = []
    for piece in (piece for _, _, pieces in group for piece in pieces):
        for line in piece.splitlines():
            (imports if IMPORT.match(line) else context).append(line)
    code = "\n".join(context + body).strip("\n")
    imports = sorted(set(IMPORT.match(line).group(1) for line in imports)) or DEFAULT_IMPORTS
    name = f"DocExample_{swift_name(path)}_{index}"
    traits = sorted(set(TRAIT_IMPORTS[module] for module in imports if module in TRAIT_IMPORTS))
    out = [
        f"// Generated by Scripts/extract-doc-examples.py from {source} (lines {lines}). Do not edit:",
        "// edit the document and run the script. Formatted as the document shows it, not linted:",
        "// swift-format-ignore-file",
        "",
        *([f"#if {' && '.join(traits)}", ""] if traits else []),
        *[line for module in imports for line in import_lines(module)],
        *(["#if canImport(FoundationNetworking)", "import FoundationNetworking", "#endif"]
          if "Foundation" in imports and URL_LOADING.search(code) else []),
        "",
    ]
    if FILE_SCOPE.search(code):
        out.append(code)
    elif DECLARATIONS.search(code) or not split_types(code)[1]:
        out += [f"struct {name} {{", indent(code), "}"]
    else:
        types, statements = split_types(code)
        out += [f"struct {name} {{", *([indent(types), ""] if types else []),
                "  @MainActor func example() async throws {", indent(statements, 4), "  }", "}"]
    if traits:
        out += ["", "#endif"]
    return f"{swift_name(path)}-{index}.swift", "\n".join(out) + "\n"


# Server modules: an example that imports one is compiled only when its package trait is on (CI's
# server step builds the tests with every trait), since apps never build the server dependencies.
TRAIT_IMPORTS = {
    "PacePostgres": "PostgreSQL", "PostgresNIO": "PostgreSQL",
    "PaceHummingbird": "Hummingbird", "Hummingbird": "Hummingbird", "HTTPTypes": "Hummingbird",
    "PaceVapor": "Vapor", "Vapor": "Vapor",
    "PaceAsyncHTTPClient": "AsyncHTTPClient", "AsyncHTTPClient": "AsyncHTTPClient",
}

# URLSession and its types are FoundationNetworking's outside Apple platforms: a block that uses them
# gets that import too, where it exists, as an app's file would have it.
URL_LOADING = re.compile(r"\b(URLSession|URLRequest|URLResponse|HTTPURLResponse)\b")

# Apple-only modules: the same example compiles against Combine or SwiftUI where they exist, and
# here against OpenCombine and the SwiftUI stand-in (with PaceSwiftUI's glue compiled against it).
PLATFORM_IMPORTS = {
    "Combine": ("Combine", "Combine", "OpenCombine"),
    "SwiftUI": ("SwiftUI", "SwiftUI", "SwiftUIStandIn"),
    "PaceSwiftUI": ("SwiftUI", "PaceSwiftUI", "PaceSwiftUIOnStandIn"),
}


def import_lines(module):
    if module not in PLATFORM_IMPORTS:
        return [f"import {module}"]
    condition, real, stand_in = PLATFORM_IMPORTS[module]
    return [f"#if canImport({condition})", f"import {real}", "#else", f"import {stand_in}", "#endif"]


TYPE = re.compile(r"^(@\w+(\(.*?\))?\s+)*(public |final )*(struct|enum|class|actor|protocol|func) \w+")


ATTRIBUTES = re.compile(r"^(@\w+(\(.*?\))?\s*)+$")


def split_types(code):
    """Splits a fragment into its top-level type declarations (members of the example's struct,
    so the statements may use them in any order) and its statements (the function body)."""
    types, statements, attributes, inside = [], [], [], False
    for line in code.splitlines():
        if inside:
            types.append(line)
            inside = line != "}"
        elif ATTRIBUTES.match(line):
            attributes.append(line)   # `@MainActor @Observable` on a line of its own
        elif TYPE.match(line):
            types += attributes + [line]
            # Until a `}` at the start of a line, unless the declaration closes on its own line.
            attributes = []
            inside = line.count("{") > line.count("}") or not line.rstrip().endswith("}")
        else:
            statements += attributes + [line]
            attributes = []
    statements += attributes
    return "\n".join(types).strip("\n"), "\n".join(statements).strip("\n")


def indent(code, spaces=2):
    return "\n".join((" " * spaces + line) if line.strip() else "" for line in code.splitlines())


def generate():
    files, skipped = {}, []
    for path in documents():
        found, skips = groups(path)
        skipped += skips
        for index, group in enumerate(found, start=1):
            name, content = render(path, index, group)
            files[name] = content
    return files, skipped


def main():
    check = "--check" in sys.argv[1:]
    files, skipped = generate()
    existing = {path.name: path.read_text() for path in OUTPUT.glob("*.swift")} if OUTPUT.exists() else {}
    stale = sorted(set(existing) ^ set(files) | {name for name in files if existing.get(name) != files[name]})
    for note in skipped:
        print(f"not compiled: {note}")
    if check:
        if stale:
            print("error: Tests/DocExamplesTests/Generated is stale; run Scripts/extract-doc-examples.py:",
                  file=sys.stderr)
            for name in stale:
                print(f"  {name}", file=sys.stderr)
            sys.exit(1)
        print(f"doc examples up to date: {len(files)} files")
        return
    OUTPUT.mkdir(parents=True, exist_ok=True)
    for name in set(existing) - set(files):
        (OUTPUT / name).unlink()
    for name, content in files.items():
        if existing.get(name) != content:
            (OUTPUT / name).write_text(content)
    print(f"wrote {len(files)} files to {OUTPUT.relative_to(ROOT)} ({len(stale)} changed)")


if __name__ == "__main__":
    main()

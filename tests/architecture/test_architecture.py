"""The structure docs/architecture.md promises, checked from the code itself.

* Python: no import cycle among cachelab's modules, and no import from a lower layer to a
  higher one (the layers are the table below, the same as docs/architecture.md's picture);
  imports at module top, except the deferred imports of matplotlib-drawing modules (and of a
  few heavy optional dependencies) each marked with a comment saying so.
* Rust: no cycle among a crate's modules (``use crate::…``, ``use super::…``, ``self::…``).
* No source file over 800 lines; the CLI never starts a server.

Imports are read with :mod:`ast` (every ``import`` statement, also inside functions), so the
test sees what Python would import, not a hand-kept list.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "cachelab"
CRATES = ROOT / "crates"

#: Layers of the Python package, bottom first: a module may import its own layer's modules
#: and lower ones, never a higher one. A name matches a module and everything below it.
LAYERS: list[tuple[str, ...]] = [
    ("cachelab._core", "cachelab.errors", "cachelab._lazy"),
    ("cachelab.units", "cachelab.environment", "cachelab.progress", "cachelab.tls",
     "cachelab.intervals", "cachelab.answers", "cachelab.glossary"),
    ("cachelab.tables", "cachelab.artifacts", "cachelab.schemas", "cachelab.childproc",
     "cachelab.pool", "cachelab.raycluster"),
    ("cachelab.servers", "cachelab.resp"),
    ("cachelab.capacity",),
    ("cachelab.proxies",),
    ("cachelab.target",),
    ("cachelab.traces", "cachelab.plots", "cachelab.page", "cachelab.tiered"),
    ("cachelab.profile", "cachelab.load", "cachelab.usl", "cachelab.tiers", "cachelab.trace"),
    ("cachelab.simulate", "cachelab.size", "cachelab.scale"),
    ("cachelab.replay",),
    ("cachelab.compare",),
    ("cachelab.report",),
    ("cachelab.run",),
    ("cachelab.cli", "cachelab.__main__", "cachelab"),
]

#: Modules that may be imported inside a function, with a comment that says why: drawing
#: (matplotlib takes ~0.4 s to import), the trace formats built on pyarrow, optional or
#: slow-to-import third-party libraries, and what simulating a flat trace by path does not
#: need (its start-up counts in the flat-simulation bench: tests/architecture/
#: test_lean_imports.py).
DEFERRABLE = re.compile(r"^(cachelab\.plots(\..*)?|cachelab\.[a-z_]+\.plots|matplotlib(\..*)?|"
                        r"cachelab\.traces\.(jsonl|parquet|capture|capture_monitor|stream|names)|pyarrow(\..*)?|"
                        r"csv|pathlib|cachelab\.artifacts|jsonschema(\..*)?|psycopg|"
                        r"pymemcache(\..*)?|redis(\..*)?|msgpack|orjson|zstandard|lz4(\..*)?|uuid|zoneinfo|"
                        r"ray(\..*)?|scipy(\..*)?|statsmodels(\..*)?)$")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _python_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


MODULES = {_module_name(p): p for p in _python_files()}


def _resolve(name: str) -> str | None:
    """The cachelab module ``name`` refers to (itself, or its nearest enclosing module)."""
    while name:
        if name in MODULES or name == "cachelab._core":
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(path: Path) -> Iterator[tuple[str, ast.stmt, bool]]:
    """(imported cachelab module, statement, inside a function) for every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]

    def visit(node: ast.AST, nested: bool) -> Iterator[tuple[str, ast.stmt, bool]]:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    yield a.name, child, nested
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*up, base] if base else up)
                for a in child.names:
                    full = f"{base}.{a.name}"
                    yield (full if _resolve(full) == full else base), child, nested
            else:
                yield from visit(child, inner)

    yield from visit(tree, False)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for name, path in MODULES.items():
        for target, _stmt, _nested in _imports(path):
            t = _resolve(target) if target.startswith("cachelab") else None
            if t and t != name:
                graph[name].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _layer(module: str) -> int:
    best, depth = -1, -1
    for i, names in enumerate(LAYERS):
        for n in names:
            if (module == n or module.startswith(n + ".")) and len(n) > depth:
                best, depth = i, len(n)
    return best


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if _layer(m) < 0] == []


def test_no_import_cycles_in_python() -> None:
    assert _cycles(_graph()) == []


def test_no_import_runs_up_a_layer() -> None:
    bad = [f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)})"
           for a, targets in _graph().items() for b in sorted(targets)
           if _layer(b) > _layer(a)]
    assert bad == []


def test_imports_are_at_module_top_unless_deferred_on_purpose() -> None:
    bad = []
    for path in MODULES.values():
        lines = path.read_text().splitlines()
        for target, stmt, nested in _imports(path):
            if not nested:
                continue
            # The comment stands on the import's line or just above it.
            near = " ".join(lines[max(0, stmt.lineno - 3): stmt.lineno]).lower()
            marked = "deferred" in near
            if not (DEFERRABLE.match(target) and marked):
                bad.append(f"{path.relative_to(ROOT)}:{stmt.lineno}: {target}")
    assert bad == []


def test_the_cli_starts_no_server() -> None:
    """One place starts a private memcached: the library (cachelab.target.Target.open)."""
    bad = [str(p.relative_to(ROOT)) for p in (PACKAGE / "cli").glob("*.py")
           if "PrivateMemcached" in p.read_text()]
    assert bad == []


def test_nothing_below_the_cli_imports_it() -> None:
    bad = [f"{a} imports {b}" for a, targets in _graph().items() for b in targets
           if b.startswith("cachelab.cli") and not a.startswith("cachelab.cli")
           and a != "cachelab.__main__"]
    assert bad == []


@pytest.mark.parametrize("ext", ["py", "rs", "js"])
def test_no_source_file_over_800_lines(ext: str) -> None:
    roots = [ROOT / "python", CRATES]
    big = [f"{p.relative_to(ROOT)}: {n}" for r in roots for p in sorted(r.rglob(f"*.{ext}"))
           if "target" not in p.parts and (n := len(p.read_text().splitlines())) > 800]
    assert big == []


# -- one entry per verb, one target, one output door ---------------------------------------

#: The verb packages: each has ``verb.py`` defining ``run(spec, target=None, *, progress=None,
#: ...)``, re-exported by the face (``cachelab.load.run``); ``trace``'s spec names its
#: subcommand (synth, inspect, capture, convert) over the ``cachelab.traces`` library.
VERB_PACKAGES = ("profile", "load", "scale", "usl", "simulate", "size", "tiers", "trace",
                 "replay", "compare", "report", "run")


def _function(path: Path, name: str) -> ast.FunctionDef | None:
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


@pytest.mark.parametrize("verb", VERB_PACKAGES)
def test_every_verb_package_has_one_entry_in_verb_py(verb: str) -> None:
    path = PACKAGE / verb / "verb.py"
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing"
    run = _function(path, "run")
    assert run is not None, f"{path.relative_to(ROOT)} defines no run()"
    positional = [a.arg for a in run.args.posonlyargs + run.args.args]
    assert positional == ["spec", "target"], positional
    # target is optional: None (a private memcached, or no server at all)
    assert isinstance(run.args.defaults[-1], ast.Constant) and run.args.defaults[-1].value is None
    assert "progress" in [a.arg for a in run.args.kwonlyargs]


@pytest.mark.parametrize("verb", VERB_PACKAGES)
def test_the_face_re_exports_the_verbs_run(verb: str) -> None:
    face = importlib.import_module(f"cachelab.{verb}")
    entry = importlib.import_module(f"cachelab.{verb}.verb")
    assert face.run is entry.run
    assert "run" in face.__all__


#: The CLI helpers that read the server flags: only ``cli/target.py`` (``target_from``) calls
#: them, so a verb's server is parsed once, in one place.
_SERVER_FLAG_READERS = re.compile(r"\b(server_address|server_members|proxy_address|"
                                  r"server_options|ray_options)\(")


def test_the_target_is_built_in_one_place() -> None:
    allowed = {"target.py", "common.py", "cluster.py"}
    bad = [f"{p.relative_to(ROOT)}: {m.group(1)}" for p in sorted((PACKAGE / "cli").glob("*.py"))
           if p.name not in allowed for m in _SERVER_FLAG_READERS.finditer(p.read_text())]
    assert bad == []


#: Who may start a private memcached or twemproxy: the modules that define them, the target
#: that opens them for every verb, and ``compare --server-cmd``, which starts the user's own
#: command lines because the command is what it measures.
MAY_START = {"cachelab.servers", "cachelab.proxies", "cachelab.target", "cachelab.compare.servers"}
_STARTERS = {"serve", "private_pool", "PrivateMemcached", "PrivateTwemproxy"}


def test_a_verbs_server_is_opened_by_the_target_alone() -> None:
    bad = []
    for name, path in MODULES.items():
        if name in MAY_START:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else \
                    f.attr if isinstance(f, ast.Attribute) else None
                if called in _STARTERS:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {called}()")
    assert bad == []


#: Modules below cli/ that may write to the terminal, and why. Nothing else below the CLI
#: prints, writes to sys.stdout/sys.stderr, or exits: it returns a result or raises.
MAY_PRINT = {
    # the progress bar, and a verb's log lines through Progress.say (its stream, stderr)
    "cachelab.progress": "draws the progress bar and says a verb's log lines",
}

_EXITS = {("sys", "exit"), ("os", "_exit")}


def _prints_or_exits(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "SystemExit":
                out.append(f"{node.lineno}: raise SystemExit")
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("print", "exit", "quit"):
            out.append(f"{node.lineno}: {f.id}()")
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                (f.value.id, f.attr) in _EXITS:
            out.append(f"{node.lineno}: {f.value.id}.{f.attr}()")
        elif isinstance(f, ast.Attribute) and f.attr in ("write", "writelines") and \
                isinstance(f.value, ast.Attribute) and isinstance(f.value.value, ast.Name) and \
                f.value.value.id == "sys" and f.value.attr in ("stdout", "stderr"):
            out.append(f"{node.lineno}: sys.{f.value.attr}.{f.attr}()")
    return out


def test_nothing_below_the_cli_prints_or_exits() -> None:
    bad = [f"{path.relative_to(ROOT)}:{where}" for name, path in MODULES.items()
           if not (name.startswith("cachelab.cli") or name in ("cachelab.__main__", *MAY_PRINT))
           for where in _prints_or_exits(path)]
    assert bad == []


def test_the_print_rule_sees_a_print() -> None:
    """The rule above is not blind: it finds the calls it forbids."""
    sample = ROOT / "tests" / "architecture" / "test_architecture.py"
    assert _prints_or_exits(sample) == []
    found = _prints_or_exits(PACKAGE / "cli" / "common.py")
    assert any("print()" in f for f in found)


# -- Rust ---------------------------------------------------------------------------------

_USE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
_GROUP = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^{}]*)\}")


def _expand_groups(text: str) -> str:
    """``crate::{a, b::c}`` -> ``crate::a crate::b::c`` (innermost groups first)."""
    while True:
        new = _GROUP.sub(lambda m: " ".join(f"{m.group(1)}::{item.strip()}"
                                            for item in m.group(2).split(",") if item.strip()),
                         text)
        if new == text:
            return text
        text = new


def _rust_modules(src: Path) -> dict[tuple[str, ...], Path]:
    mods: dict[tuple[str, ...], Path] = {}
    for p in src.rglob("*.rs"):
        rel = p.relative_to(src).with_suffix("").parts
        if rel in (("lib",), ("main",)):
            rel = ()
        elif rel[-1] == "mod":
            rel = rel[:-1]
        elif rel[0] == "bin":
            continue
        mods[tuple(rel)] = p
    return mods


def _rust_edges(src: Path) -> dict[str, set[str]]:
    mods = _rust_modules(src)
    graph: dict[str, set[str]] = {"::".join(m) or "lib": set() for m in mods}
    for mod, path in mods.items():
        me = "::".join(mod) or "lib"
        text = re.sub(r"//[^\n]*", "", path.read_text())
        text = text.split("#[cfg(test)]")[0]  # unit tests may use anything of their module
        text = _expand_groups(text)
        for root, rest in _USE.findall(text):
            parts = [x for x in rest.split("::") if x]
            base: list[str]
            if root == "crate":
                base = []
            elif root == "super":
                base = list(mod[:-1])
                while parts and parts[0] == "super":
                    base, parts = base[:-1], parts[1:]
            else:
                base = list(mod)
            path_parts = base + parts
            # The deepest module the path names (the rest is an item inside it).
            target = None
            for k in range(len(path_parts), -1, -1):
                if tuple(path_parts[:k]) in mods:
                    target = tuple(path_parts[:k])
                    break
            if target is None or target == mod:
                continue
            name = "::".join(target) or "lib"
            # A module naming its own descendants (`mod child; use child::X`) is a parent
            # composing its parts, not a cycle-forming import; only count real imports.
            graph[me].add(name)
    return graph


@pytest.mark.parametrize("crate", sorted(p.name for p in CRATES.iterdir()
                                          if (p / "src").is_dir()))
def test_no_module_cycles_in_rust(crate: str) -> None:
    graph = _rust_edges(CRATES / crate / "src")
    # A crate root and a parent `mod.rs` re-export their children (`pub use`), and children
    # name siblings through them; that is not a cycle between the children themselves.
    for parent in list(graph):
        graph[parent] = {c for c in graph[parent]
                         if not (parent == "lib" or c.startswith(parent + "::"))}
    assert _cycles(graph) == []

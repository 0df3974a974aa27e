"""Who may import whom in a package: the floors of ARCHITECTURE.md, as a checker the tests run.

``imports(src, package)`` reads every ``.py`` file of ``src/package`` (nothing is imported or
run) and lists every import statement that names a module of the package, at the top of a module
or inside a function, resolved to the module it loads (``from pkg import sub`` is ``pkg.sub``
when ``sub`` is a module, else ``pkg``). ``violations(...)`` applies the rules:

- **no cycle**: the modules and their imports form no circle (an import inside a function counts:
  it runs sooner or later, and a circle means neither module can be understood alone);
- **no upward import**: a module imports only from its own floor or below;
- **no sideways import** between different packages of one floor (``live``, ``grading`` and
  ``problems`` stand side by side on the same floor and know nothing of each other);
- **reserved packages**: a package only some may import (the CLI is the application shell: only
  its own entry points import it; ``live`` is the real system: the CLI reaches it, no page or model);
- **no private name across packages**: ``from a.b import _x`` only from a module of ``a`` itself
  (the directory that holds it); a name with a leading underscore is that package's business;
- **lazy imports buy something**: an import inside a function is for a module that is slow or
  optional to load (one of ``heavy``, or a module of the package whose top-level imports reach
  one), or it sits in a package allowed lazy imports (the CLI: each command loads only what it
  runs). A lazy import of a light module only hides a dependency.
"""
from __future__ import annotations

import ast
import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Import:
    source: str      # the importing module (dotted)
    target: str      # the module it loads (dotted), of the package or not
    line: int
    names: tuple     # the names taken from it (from-imports), else ()
    lazy: bool       # inside a function (or a class body): runs when called, not on import
    path: str        # the importing file, for messages


@dataclass
class Rules:
    floors: list                      # [(floor name, [top-level names under the package])], lowest first
    siblings: list = field(default_factory=list)   # sets of packages on one floor that may not import each other
    reserved: dict = field(default_factory=dict)   # package part -> parts that may import it
    lazy_ok: tuple = ()               # package parts whose modules may import lazily
    heavy: dict = field(default_factory=dict)      # third-party top-level module -> why it is deferred
    known: list = field(default_factory=list)      # (rule, source, target, who removes it); * and ? match

    def floor_of(self, part: str) -> int | None:
        for k, (_, parts) in enumerate(self.floors):
            if part in parts:
                return k
        return None


def _modules(src: Path, package: str) -> dict[str, Path]:
    out = {}
    for p in sorted((src / package).rglob("*.py")):
        parts = list(p.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _type_checking(node) -> bool:
    test = node.test
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or \
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _top_level_nodes(tree: ast.Module) -> tuple[set[int], set[int]]:
    """ids of the statements that run on import (the module's body, and the bodies of its
    if/try/with blocks), and of the imports under ``if TYPE_CHECKING:`` (they never run)."""
    out: set[int] = set()
    never: set[int] = set()

    def walk(body):
        for node in body:
            out.add(id(node))
            if isinstance(node, ast.If):
                if _type_checking(node):
                    never.update(id(n) for n in ast.walk(node))
                else:
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk(node.body)
                walk(node.orelse)
                walk(node.finalbody)
                for h in node.handlers:
                    walk(h.body)
            elif isinstance(node, (ast.With, ast.For, ast.While)):
                walk(node.body)
    walk(tree.body)
    return out, never


def imports(src: Path, package: str) -> tuple[list[Import], dict[str, Path]]:
    """Every import statement of the package's modules (see the module's docstring)."""
    mods = _modules(src, package)
    found: list[Import] = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        top, never = _top_level_nodes(tree)
        here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in never:
                continue
            lazy = id(node) not in top
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.append(Import(mod, alias.name, node.lineno, (), lazy, str(path)))
                continue
            if node.level:
                base = here.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            plain = [a.name for a in node.names if f"{target}.{a.name}" not in mods]
            for alias in node.names:
                if f"{target}.{alias.name}" in mods:  # a submodule: the module it loads
                    found.append(Import(mod, f"{target}.{alias.name}", node.lineno, (), lazy, str(path)))
            if plain or not node.names:
                found.append(Import(mod, target, node.lineno, tuple(plain), lazy, str(path)))
    return found, mods


def _part(module: str, package: str) -> str | None:
    """The top-level name under the package (``courselib.model.cost`` -> ``model``); ``""`` for
    the package itself; None outside it."""
    if module == package:
        return ""
    if not module.startswith(package + "."):
        return None
    return module[len(package) + 1:].split(".")[0]


def _directory(module: str, mods: dict[str, Path]) -> str:
    """The package (directory) a module lives in: itself for a package's ``__init__``."""
    path = mods.get(module)
    if path is not None and path.name == "__init__.py":
        return module
    return module.rpartition(".")[0]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
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

    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def _heavy_modules(found: list[Import], mods: dict[str, Path], rules: Rules) -> set[str]:
    """The package's modules whose top-level imports (followed through the package) reach a heavy
    third-party module."""
    top_edges: dict[str, set[str]] = {m: set() for m in mods}
    heavy = set()
    for imp in found:
        if imp.lazy:
            continue
        if imp.target in mods:
            top_edges[imp.source].add(imp.target)
        elif imp.target.split(".")[0] in rules.heavy:
            heavy.add(imp.source)
    # a module loads its parents' __init__ too
    for m in mods:
        parent = m.rpartition(".")[0]
        while parent:
            if parent in mods:
                top_edges[m].add(parent)
            parent = parent.rpartition(".")[0]
    changed = True
    while changed:
        changed = False
        for m, targets in top_edges.items():
            if m not in heavy and targets & heavy:
                heavy.add(m)
                changed = True
    return heavy


def violations(src: Path, package: str, rules: Rules) -> list[str]:
    """One line per broken rule: ``path:line: what, and why it is not allowed``."""
    found, mods = imports(src, package)
    out: list[str] = []
    used: set[tuple] = set()

    def listed(rule: str, source: str, target: str) -> tuple | None:
        for entry in rules.known:
            if entry[0] == rule and fnmatch.fnmatchcase(source, entry[1]) and fnmatch.fnmatchcase(target, entry[2]):
                used.add(tuple(entry[:3]))
                return entry
        return None

    def report(rule: str, imp: Import, text: str) -> None:
        if listed(rule, imp.source, imp.target) is None:
            out.append(f"{imp.path}:{imp.line}: {text}")

    edges: dict[str, set[str]] = {}
    for imp in found:
        if imp.target in mods and imp.target != imp.source:
            edges.setdefault(imp.source, set()).add(imp.target)
    for comp in cycles(edges):
        inside = [i for i in found if i.source in comp and i.target in comp and i.source != i.target]
        if [i for i in inside if listed("cycle", i.source, i.target)]:
            continue  # a listed edge of the circle is being removed by its owner: that opens it
        steps = "; ".join(f"{Path(i.path).name}:{i.line} {i.source} -> {i.target}" for i in inside)
        out.append(f"import cycle among {', '.join(comp)}: {steps}")

    heavy = _heavy_modules(found, mods, rules)
    for imp in found:
        src_part, dst_part = _part(imp.source, package), _part(imp.target, package)
        if dst_part is not None and imp.target != imp.source and dst_part != src_part:
            a, b = rules.floor_of(src_part), rules.floor_of(dst_part)
            if a is None or b is None:
                report("floor", imp, f"{imp.source} -> {imp.target}: "
                       f"{(src_part if a is None else dst_part) or package!r} is on no floor (add it to FLOORS)")
            elif b > a:
                report("upward", imp, f"{imp.source} imports {imp.target}: an upward import "
                       f"(floor {rules.floors[a][0]!r} below {rules.floors[b][0]!r})")
            elif a == b and any(src_part in group and dst_part in group for group in rules.siblings):
                report("sideways", imp, f"{imp.source} imports {imp.target}: a sideways import "
                       f"between {src_part!r} and {dst_part!r} (one floor, independent packages)")
            if dst_part in rules.reserved and src_part not in rules.reserved[dst_part]:
                report("reserved", imp, f"{imp.source} imports {imp.target}: only "
                       f"{', '.join(sorted(rules.reserved[dst_part]))} may import {dst_part!r}")
        if dst_part is not None:
            private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
            private_mod = any(p.startswith("_") and not p.startswith("__")
                              for p in imp.target[len(package):].split("."))
            home, theirs = _directory(imp.source, mods), _directory(imp.target, mods)
            if (private or private_mod) and home != theirs:
                what = ", ".join(private) if private else imp.target
                report("private", imp, f"{imp.source} imports {what} from {imp.target}: a private "
                       "name of another package (make it public there, or move the code)")
        if imp.lazy and src_part not in rules.lazy_ok:
            top = imp.target.split(".")[0]
            if dst_part is not None and imp.target not in heavy and imp.target in mods:
                report("lazy", imp, f"{imp.source} imports {imp.target} inside a function: it is light "
                       "(no heavy dependency behind it), so import it at the top")
            elif dst_part is None and top not in rules.heavy:
                report("lazy", imp, f"{imp.source} imports {imp.target} inside a function: not a heavy "
                       "optional dependency, so import it at the top")
    for entry in rules.known:
        if tuple(entry[:3]) not in used:
            out.append(f"known break {entry[0]} {entry[1]} -> {entry[2]} ({entry[3]}) no longer breaks a rule: "
                       "take it out of the list")
    return out

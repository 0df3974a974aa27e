"""Per-student variants of a lab: a seed, the lab's numbers for that seed, and where the seed is kept.

A lab with variants has, in its solution notebook,

- one given code cell tagged ``parameters`` whose top-level literal assignments (``HELD_GPUS = 448``)
  are the lab's numbers; as written they are **seed 0**, the default lab the book shows;
- one code cell tagged ``variant`` (the instructor's, never in the student's lab) defining
  ``variant(rng) -> dict``: the numbers for any other seed, drawn from :class:`Rng`.

For seed ``S`` the ``parameters`` cell's named lines become ``NAME = repr(value)`` (a string of several
lines, such as a Dockerfile, as a triple-quoted block, one line a line), and ``{{NAME}}``
in the lab's Markdown becomes the value (for seed 0 the cell's own literal), so prose and code show
the student's numbers. The seed is recorded in the notebook's metadata (``course.seed``; absent
means 0), never read from a student's cell. The grader runs the ``parameters`` cell of the
*instructor's* manifest, rewritten for the graded seed, in its own trusted namespace: a check reads
the same names and computes the expected value from them (see ``/work/notes/INTERFACES.md``).

:class:`Rng` is a hash counter (SHA-256), not :mod:`random`: the same seed gives the same numbers on
every machine and Python version, forever.
"""
from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from courselib.errors import InputError

PARAMETERS_TAG = "parameters"
VARIANT_TAG = "variant"
MAX_SEED = 2**63 - 1
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_LITERAL_TYPES = (int, float, str, bool, type(None))


class Rng:
    """The numbers of one seed: every draw is SHA-256 of (seed, draw number), so it never changes."""

    def __init__(self, seed: int):
        self.seed = int(seed)
        self._n = 0

    def _bits(self) -> int:
        self._n += 1
        digest = hashlib.sha256(f"all-or-nothing/{self.seed}/{self._n}".encode()).digest()
        return int.from_bytes(digest[:8], "big")

    def integer(self, lo: int, hi: int) -> int:
        """A whole number from ``lo`` to ``hi``, both included."""
        if hi < lo:
            raise ValueError(f"integer({lo}, {hi}): hi < lo")
        return lo + self._bits() % (hi - lo + 1)

    def pick(self, seq):
        """One element of ``seq``."""
        seq = list(seq)
        if not seq:
            raise ValueError("pick() from an empty sequence")
        return seq[self.integer(0, len(seq) - 1)]

    def real(self, lo: float, hi: float, digits: int = 2) -> float:
        """A number from ``lo`` to ``hi`` rounded to ``digits`` decimals."""
        return round(lo + (hi - lo) * (self._bits() / 2**64), digits)

    def shuffled(self, seq) -> list:
        out = list(seq)
        for i in range(len(out) - 1, 0, -1):
            j = self.integer(0, i)
            out[i], out[j] = out[j], out[i]
        return out

    def sample(self, seq, k: int) -> list:
        return self.shuffled(seq)[:k]


def seed_of(text) -> int:
    """A seed from what an instructor has: an integer as itself, anything else (a login) hashed."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        s = str(text).strip()
        if re.fullmatch(r"\d{1,19}", s):
            value = int(s)
        elif s:
            value = int.from_bytes(hashlib.sha256(f"all-or-nothing seed/{s}".encode()).digest()[:7], "big") + 1
        else:
            raise InputError("an empty seed", field="--seed", hint="give a number, a login or a student id")
    if not 0 <= value <= MAX_SEED:
        raise InputError(f"seed {value} is outside 0..{MAX_SEED}", field="--seed")
    return value


def recorded_seed(nb, where: str) -> int:
    """The seed a notebook's metadata records (0 when it records none)."""
    meta = nb.get("metadata", {}).get("course", {}) if isinstance(nb.get("metadata"), dict) else {}
    seed = meta.get("seed", 0) if isinstance(meta, dict) else 0
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"the recorded seed {seed!r} is not a whole number from 0 to {MAX_SEED}",
                         file=where, field="metadata.course.seed",
                         hint="grade it with --seed S (the seed this student was given)")
    return seed


def _assignments(source: str, where: str) -> dict[str, ast.Assign]:
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise InputError(f"the parameters cell does not parse: {err.msg}", file=where, line=err.lineno) from None
    out: dict[str, ast.Assign] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in out:
                raise InputError(f"`{name}` is assigned twice in the parameters cell", file=where, line=node.lineno)
            out[name] = node
    return out


def defaults(source: str, where: str) -> dict:
    """Seed 0's numbers: the literal values of the parameters cell (names with a non-literal value left out)."""
    out = {}
    for name, node in _assignments(source, where).items():
        try:
            out[name] = ast.literal_eval(node.value)
        except ValueError:
            continue
    return out


def _literal(name: str, value, where: str) -> str:
    def ok(v) -> bool:
        if isinstance(v, _LITERAL_TYPES):
            return not (isinstance(v, float) and v != v)
        if isinstance(v, (list, tuple)):
            return all(ok(x) for x in v)
        if isinstance(v, dict):
            return all(ok(k) and ok(x) for k, x in v.items())
        return False

    text = repr(value)
    if not ok(value) or ast.literal_eval(text) != value:
        raise InputError(f"variant() gave `{name}` = {text[:80]}, which is not a plain literal "
                         f"(numbers, strings, tuples, lists, dicts)", file=where, field=VARIANT_TAG)
    return _block(value) or text


def _block(value) -> str | None:
    """A string of several lines written as the lab writes one (a Dockerfile's text): a triple-quoted
    block, one line a line, rather than ``repr``'s one long line; None when that would not read back."""
    if not isinstance(value, str) or "\n" not in value or '"""' in value or "\\" in value or value.endswith('"'):
        return None
    text = '"""\\\n' + value + '"""'
    try:
        return text if ast.literal_eval(text) == value else None
    except (SyntaxError, ValueError):
        return None


def rewrite(source: str, values: dict, where: str) -> str:
    """The parameters cell with each named assignment's value replaced (comments and other lines kept)."""
    nodes = _assignments(source, where)
    unknown = sorted(set(values) - set(nodes))
    if unknown:
        raise InputError(f"variant() gives {unknown}, which the parameters cell does not assign",
                         file=where, field=VARIANT_TAG, hint="assign each name once, at the top level")
    lines = source.splitlines(keepends=True)
    # edit from the bottom up so earlier positions stay valid
    for name, node in sorted(nodes.items(), key=lambda kv: -kv[1].value.lineno):
        if name not in values:
            continue
        v = node.value
        first, last = v.lineno - 1, v.end_lineno - 1
        head = lines[first][:_byte_to_char(lines[first], v.col_offset)]
        tail = lines[last][_byte_to_char(lines[last], v.end_col_offset):]
        lines[first:last + 1] = [head + _literal(name, values[name], where) + tail]
    return "".join(lines)


def _byte_to_char(line: str, offset: int) -> int:
    return len(line.encode("utf-8")[:offset].decode("utf-8", "replace"))


def run_variant(source: str, seed: int, where: str) -> dict:
    """Call the lab's ``variant(rng)`` for ``seed`` (the instructor's code, run on the instructor's side)."""
    ns: dict = {"__name__": "__variant__"}
    try:
        exec(compile(source, f"<{where} variant>", "exec"), ns)  # noqa: S102 — the instructor's source
    except Exception as err:  # noqa: BLE001
        raise InputError(f"the variant cell raised {type(err).__name__}: {err}", file=where, field=VARIANT_TAG) from None
    fn = ns.get("variant")
    if not callable(fn):
        raise InputError("the cell tagged 'variant' defines no function variant(rng)", file=where, field=VARIANT_TAG)
    try:
        values = fn(Rng(seed))
    except Exception as err:  # noqa: BLE001
        raise InputError(f"variant(rng) for seed {seed} raised {type(err).__name__}: {err}",
                         file=where, field=VARIANT_TAG) from None
    if not isinstance(values, dict) or not all(isinstance(k, str) and k.isidentifier() for k in values):
        raise InputError("variant(rng) must return a dict of parameter names to values", file=where,
                         field=VARIANT_TAG)
    return values


def values_for(parameters: str, variant_source: str | None, seed: int, where: str) -> dict:
    """Every number of the lab for ``seed``: seed 0's literals, overridden by ``variant`` for other seeds."""
    base = defaults(parameters, where)
    if seed and variant_source:
        base.update(run_variant(variant_source, seed, where))
    return base


def parameters_for(parameters: str, variant_source: str | None, seed: int, where: str) -> str:
    """The parameters cell's source for ``seed`` (seed 0, or a lab without variants: as written)."""
    if not seed or not variant_source:
        return parameters
    return rewrite(parameters, run_variant(variant_source, seed, where), where)


def fill(text: str, values: dict, where: str) -> str:
    """``{{NAME}}`` in a Markdown cell replaced by the seed's value (an unknown name is a located error)."""
    def sub(m):
        name = m.group(1)
        if name not in values:
            raise InputError(f"{{{{{name}}}}} is not a name of the parameters cell", file=where,
                             hint="assign it in the cell tagged 'parameters'")
        v = values[name]
        return f"{v:g}" if isinstance(v, float) else str(v)

    return _PLACEHOLDER.sub(sub, text)


def has_placeholders(text: str) -> bool:
    return bool(_PLACEHOLDER.search(text))


def lab_name(path_or_name: str) -> str:
    return Path(str(path_or_name)).stem

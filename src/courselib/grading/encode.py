"""Answers as plain data: what crosses from the student's process to the grader's checks.

The grader never runs a check in the process that ran the student's code, and never unpickles
anything from it. A student's answer is turned into a tree of JSON values by :func:`encode` (in the
student's process), and rebuilt by :func:`decode` (in the grader) from exact built-in types and
courselib's own dataclasses only. Anything else — a function, a class, an object with a clever
``__eq__`` — arrives as a :class:`StudentObject`: its type name and (shortened) ``repr``, so a check
can say what it found, but nothing of its behaviour.

Limits keep a hostile answer bounded: depth, number of values, string and integer length.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import math
import sys
import numbers
from typing import Any

MAX_DEPTH = 40
MAX_NODES = 200_000
MAX_STR = 1_000_000
MAX_INT_BITS = 13_000        # about 4,000 decimal digits
REPR_CHARS = 200


class TooBig(Exception):
    """The value is beyond the limits; it is sent as an opaque object instead."""


class StudentObject:
    """Something the student's code made that is not plain data (a function, a class, an object)."""

    def __init__(self, type_name: str, text: str):
        self.type_name = type_name
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


class StudentCallable(StudentObject):
    """A function or class of the student's: a check calls it only inside a ``@probe``."""

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self.text} runs only in the student's process: call it inside a "
                        f"@probe function of the check cell")


class Missing:
    """An answer name the student's code no longer defines."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<`{self.name}` is not defined>"


def _short(text: str) -> str:
    return text if len(text) <= REPR_CHARS else text[:REPR_CHARS - 1] + "…"


def _opaque(value) -> dict:
    try:
        text = _short(repr(value))
    except BaseException as err:  # a student's __repr__ may raise anything  # noqa: BLE001
        text = f"<{type(value).__name__} whose repr raised {type(err).__name__}>"
    return {"$object": {"type": _short(type(value).__name__), "repr": text, "callable": callable(value)}}


def encode(value: Any) -> Any:
    """``value`` as JSON-compatible data (run where the student's code runs)."""
    budget = [MAX_NODES]

    def enc(v, depth):
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DEPTH:
            raise TooBig
        t = type(v)
        if v is None or t is bool:
            return v
        if v is Ellipsis:
            return {"$ellipsis": True}
        if isinstance(v, numbers.Integral) and t is not bool:
            i = int(v)
            if i.bit_length() > MAX_INT_BITS:
                raise TooBig
            return i
        if isinstance(v, numbers.Real):
            f = float(v)
            return f if math.isfinite(f) else {"$float": repr(f)}
        if t is str:
            if len(v) > MAX_STR:
                raise TooBig
            return v
        if t is list:
            return [enc(x, depth + 1) for x in v]
        if t is tuple:
            return {"$tuple": [enc(x, depth + 1) for x in v]}
        if t in (set, frozenset):
            return {"$set" if t is set else "$frozenset": [enc(x, depth + 1) for x in v]}
        if t is dict:
            return {"$dict": [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in v.items()]}
        if dataclasses.is_dataclass(t) and getattr(t, "__module__", "").startswith("courselib."):
            fields = {f.name: enc(getattr(v, f.name), depth + 1) for f in dataclasses.fields(t) if f.init}
            return {"$dataclass": f"{t.__module__}:{t.__qualname__}", "fields": fields}
        return _opaque(v)

    try:
        return enc(value, 0)
    except TooBig:
        return {"$object": {"type": type(value).__name__, "repr": "<a value too large to grade>",
                            "callable": False}}
    except (RecursionError, ValueError):
        return _opaque(value)


class DecodeError(ValueError):
    """The data is not something :func:`encode` writes."""


DATACLASS_PACKAGES = ("courselib.model.", "courselib.sim.", "courselib.io.")


def _courselib_dataclass(name: str):
    """The courselib dataclass ``module:qualname`` names — only one the grader has already loaded.

    The name comes from the student's process (an object may claim any ``__module__``): the grader
    never imports a module because of it, and only model, simulator and reader classes qualify.
    """
    module, _, qual = name.partition(":")
    if not module.startswith(DATACLASS_PACKAGES) or not qual or "<" in qual:
        raise DecodeError(f"not a courselib dataclass: {name[:200]!r}")
    obj = sys.modules.get(module)
    if obj is None:
        raise DecodeError(f"not a courselib dataclass the grader has loaded: {name[:200]!r}")
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module):
        raise DecodeError(f"not a courselib dataclass: {name[:200]!r}")
    return obj


def preload(sources) -> None:
    """Import the courselib model modules the instructor's code names (so its dataclasses can be decoded)."""

    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for mod in names:
                if mod.startswith(DATACLASS_PACKAGES):
                    try:
                        importlib.import_module(mod)
                    except Exception:  # noqa: BLE001 — the check itself will say so
                        pass


def decode(data: Any) -> Any:
    """Rebuild what :func:`encode` wrote, from exact built-in types and courselib dataclasses only.

    A courselib dataclass is built through its own constructor, so its validation runs: a student's
    ``Job`` with a negative GPU count becomes a :class:`StudentObject` naming the error.
    """
    budget = [MAX_NODES]

    def dec(d, depth):
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DEPTH + 2:
            raise DecodeError("too large")
        t = type(d)
        if d is None or t in (bool, int, float, str):
            return d
        if t is list:
            return [dec(x, depth + 1) for x in d]
        if t is not dict or len(d) > 2:
            raise DecodeError(f"unexpected {t.__name__}")
        if "$ellipsis" in d:
            return Ellipsis
        if "$float" in d:
            text = d["$float"]
            if text not in ("nan", "inf", "-inf"):
                raise DecodeError("bad float")
            return float(text)
        if "$tuple" in d:
            return tuple(dec(x, depth + 1) for x in _list(d["$tuple"]))
        if "$set" in d or "$frozenset" in d:
            items = [dec(x, depth + 1) for x in _list(d.get("$set", d.get("$frozenset")))]
            try:
                return set(items) if "$set" in d else frozenset(items)
            except TypeError as err:
                raise DecodeError(str(err)) from None
        if "$dict" in d:
            out = {}
            for pair in _list(d["$dict"]):
                if type(pair) is not list or len(pair) != 2:
                    raise DecodeError("bad dict item")
                try:
                    out[dec(pair[0], depth + 1)] = dec(pair[1], depth + 1)
                except TypeError as err:
                    raise DecodeError(str(err)) from None
            return out
        if "$dataclass" in d:
            cls = _courselib_dataclass(str(d["$dataclass"]))
            fields = d.get("fields")
            if type(fields) is not dict:
                raise DecodeError("bad dataclass fields")
            known = {f.name for f in dataclasses.fields(cls) if f.init}
            values = {str(k): dec(v, depth + 1) for k, v in fields.items()}
            if set(values) - known:
                raise DecodeError(f"unknown fields {sorted(set(values) - known)}")
            try:
                return cls(**values)
            except Exception as err:  # the dataclass's own validation refused the student's values
                return StudentObject(cls.__name__, _short(f"<an invalid {cls.__name__}: "
                                                          f"{type(err).__name__}: {err}>"))
        if "$object" in d:
            o = d["$object"]
            if type(o) is not dict:
                raise DecodeError("bad object")
            cls = StudentCallable if o.get("callable") is True else StudentObject
            return cls(_short(str(o.get("type", "object"))), _short(str(o.get("repr", "<object>"))))
        raise DecodeError(f"unknown tag {sorted(d)!r}")

    return dec(data, 0)


def _list(x) -> list:
    if type(x) is not list:
        raise DecodeError("expected a list")
    return x

"""YAML that remembers where things are, so an error can name the line of the bad field.

Mappings load as :class:`LocatedDict` and sequences as :class:`LocatedList`; both carry the
1-based line of the node (``.line``) and of each key or item (``.line_of(key)``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from courselib.errors import InputError


class LocatedDict(dict):
    line: int | None = None

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.lines: dict[Any, int] = {}

    def line_of(self, key) -> int | None:
        return self.lines.get(key, self.line)


class LocatedList(list):
    line: int | None = None

    def __init__(self, *a):
        super().__init__(*a)
        self.lines: list[int] = []

    def line_of(self, index: int) -> int | None:
        return self.lines[index] if 0 <= index < len(self.lines) else self.line


def _loader_class():
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        loader.flatten_mapping(node)
        out = LocatedDict()
        out.line = node.start_mark.line + 1
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise InputError("a mapping key must be a plain value", line=key_node.start_mark.line + 1)
            out[key] = loader.construct_object(value_node, deep=True)
            out.lines[key] = key_node.start_mark.line + 1
        return out

    def construct_sequence(loader, node, deep=False):
        out = LocatedList(loader.construct_object(child, deep=True) for child in node.value)
        out.line = node.start_mark.line + 1
        out.lines = [child.start_mark.line + 1 for child in node.value]
        return out

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, construct_sequence)
    return Loader


_LOADER = None


def _yaml_error(err, file: str | None) -> InputError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    return InputError(f"not valid YAML: {problem}", file=file,
                      line=mark.line + 1 if mark is not None else None,
                      hint="check indentation and that every 'key: value' has a space after the colon")


def load_all_text(text: str, *, file: str | None = None) -> list[Any]:
    """Every document in ``text`` (multi-document YAML), with line information."""
    import yaml

    global _LOADER
    if _LOADER is None:
        _LOADER = _loader_class()
    try:
        return list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as err:
        raise _yaml_error(err, file) from None
    except InputError as err:
        raise err.located(file=file) from None


def read_text(path) -> str:
    """The text of ``path``, or a one-line error saying why it cannot be read."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", file=str(path), hint="check the path") from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", file=str(path)) from None
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start})", file=str(path)) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", file=str(path)) from None


def load_one(path) -> Any:
    """The single YAML document in ``path`` (an error if there are none or several)."""
    docs = [d for d in load_all_text(read_text(path), file=str(path)) if d is not None]
    if not docs:
        raise InputError("the file holds no YAML document", file=str(path))
    if len(docs) > 1:
        raise InputError(f"expected one YAML document, found {len(docs)}", file=str(path))
    return docs[0]


class Fields:
    """Typed access to a located mapping that raises located errors.

    ``f = Fields(doc, file="w.yaml", where="jobs[2]")``; ``f.req("pods", int)``,
    ``f.opt("priority", int, 0)``; ``f.unknown({"name", ...})`` reports typos.
    """

    def __init__(self, mapping, *, file: str | None, where: str = ""):
        if not isinstance(mapping, dict):
            line = getattr(mapping, "line", None)
            raise InputError(f"expected a mapping (key: value), got {type(mapping).__name__}",
                             file=file, line=line, field=where or None)
        self.m = mapping
        self.file = file
        self.where = where

    def _field(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def line(self, key=None) -> int | None:
        if key is not None and hasattr(self.m, "line_of"):
            return self.m.line_of(key)
        return getattr(self.m, "line", None)

    def error(self, key: str | None, message: str, hint: str | None = None) -> InputError:
        return InputError(message, file=self.file, line=self.line(key),
                          field=self._field(key) if key else (self.where or None), hint=hint)

    def has(self, key: str) -> bool:
        return key in self.m and self.m[key] is not None

    def req(self, key: str, conv=None):
        if not self.has(key):
            raise self.error(None, f"missing required field '{key}'", hint=f"add '{key}: ...'")
        return self._conv(key, conv)

    def opt(self, key: str, conv=None, default=None):
        if not self.has(key):
            return default
        return self._conv(key, conv)

    def _conv(self, key: str, conv):
        value = self.m[key]
        if conv is None:
            return value
        if conv is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(key, f"expected a whole number, got {value!r}")
            return value
        if conv is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(key, f"expected a number, got {value!r}")
            return float(value)
        if conv is bool:
            if not isinstance(value, bool):
                raise self.error(key, f"expected true or false, got {value!r}")
            return value
        if conv is str:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise self.error(key, f"expected text, got {value!r}")
            return str(value)
        try:
            return conv(value)
        except InputError as err:
            raise InputError(err.message, file=self.file, line=self.line(key),
                             field=self._field(key), hint=err.hint) from None
        except (TypeError, ValueError) as err:
            raise self.error(key, f"{value!r}: {err}") from None

    def unknown(self, allowed: set[str]) -> None:
        for key in self.m:
            if key not in allowed:
                import difflib
                close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                raise self.error(key, f"unknown field '{key}'",
                                 hint=f"did you mean '{close[0]}'?" if close else
                                 "allowed: " + ", ".join(sorted(allowed)))

    def items(self) -> Iterator:
        return iter(self.m.items())

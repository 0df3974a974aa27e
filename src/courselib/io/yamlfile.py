"""YAML that remembers where things are, so an error can name the line of the bad field.

Mappings load as :class:`LocatedDict` and sequences as :class:`LocatedList`; both carry the
1-based line of the node (``.line``) and of each key or item (``.line_of(key)``).

The loader is bounded (a hostile file is a one-line error, not a hang or a traceback): nesting
beyond ``COURSELIB_MAX_YAML_DEPTH`` (100) levels, aliases expanding to more than
``COURSELIB_MAX_YAML_ALIAS_NODES`` (10,000) nodes and recursive aliases are refused with their
line; a key written twice in one mapping is an error naming both lines (or, for readers that
report it as a finding, kept in ``LocatedDict.duplicates``). Files are read under
:mod:`courselib.io.policy` (regular files only, a size cap per kind).
"""
from __future__ import annotations

import difflib
from typing import Any, Iterator

from courselib.errors import InputError
from courselib.io.policy import MODEL_LIMITS, read_text as _policy_read_text


class LocatedDict(dict):
    line: int | None = None

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.lines: dict[Any, int] = {}
        self.own: dict[Any, bool] = {}           # written here, not merged in with '<<'
        self.duplicates: dict[Any, list[int]] = {}  # key -> every line it was written on

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
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
    from yaml.resolver import Resolver

    try:  # libyaml's scanner and parser (C), where PyYAML was built with it; not in Pyodide
        from yaml._yaml import CParser as Parser
        fast = True
        bases: tuple = (Composer, Parser, SafeConstructor, Resolver)
    except ImportError:
        from yaml.parser import Parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner
        fast = False
        bases = (Reader, Scanner, Parser, Composer, SafeConstructor, Resolver)

    class Loader(*bases):
        """A safe loader that bounds nesting and alias expansion and remembers duplicate keys.

        PyYAML shares an aliased node instead of copying it, so a "billion laughs" document is
        small in memory, but every reader that walks it walks 10**9 nodes; and its composer
        recurses once per level, so 10,000 nested ``[`` end in ``RecursionError``. Both are
        refused here, with the line, before anything walks the document. Events come from
        libyaml where available (about three times faster); composing and constructing are
        PyYAML's own Python, so the bounds and the line numbers are the same either way.
        """
        duplicates = "error"   # or "keep": record them on LocatedDict.duplicates for the reader

        def __init__(self, stream):
            if fast:
                Parser.__init__(self, stream)
            else:
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                Parser.__init__(self)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._depth = 0
            self._alias_nodes = 0
            self._sizes: dict[int, int] = {}
            self._open: set[str] = set()   # anchors of collections still being composed
            self._max_depth = MODEL_LIMITS["yaml_depth"].value
            self._max_alias = MODEL_LIMITS["yaml_aliases"].value

        def _size(self, node) -> int:
            """Nodes in ``node`` once every alias inside it is expanded (memoised)."""
            known = self._sizes.get(id(node))
            if known is not None:
                return known
            if isinstance(node, yaml.SequenceNode):
                size = 1 + sum(self._size(c) for c in node.value)
            elif isinstance(node, yaml.MappingNode):
                size = 1 + sum(self._size(k) + self._size(v) for k, v in node.value)
            else:
                size = 1
            self._sizes[id(node)] = size
            return size

        def compose_node(self, parent, index):
            if self.check_event(AliasEvent):
                event = self.peek_event()
                if event.anchor in self._open:
                    raise InputError(f"the alias *{event.anchor} refers to a node that contains it "
                                     "(a recursive structure)", line=event.start_mark.line + 1,
                                     hint="write the value out, or refer to a node defined before")
                node = self.anchors.get(event.anchor)
                if node is not None:
                    self._alias_nodes += self._size(node)
                    if self._alias_nodes > self._max_alias:
                        lim = MODEL_LIMITS["yaml_aliases"]
                        raise InputError(
                            f"YAML aliases here expand to more than {lim.show(self._max_alias)} "
                            "(a \"billion laughs\" document?)", line=event.start_mark.line + 1,
                            field=f"*{event.anchor}", hint="write the values out, or " + lim.hint())
                return Composer.compose_node(self, parent, index)
            event = self.peek_event()
            nests = isinstance(event, (SequenceStartEvent, MappingStartEvent))
            anchor = event.anchor if nests else None
            if nests:
                self._depth += 1
                if self._depth > self._max_depth:
                    lim = MODEL_LIMITS["yaml_depth"]
                    raise InputError(f"nested more than {lim.show(self._max_depth)} deep",
                                     line=event.start_mark.line + 1,
                                     hint="no course file nests that deep; " + lim.hint())
                if anchor is not None:
                    self._open.add(anchor)
            try:
                node = Composer.compose_node(self, parent, index)
            finally:
                if nests:
                    self._depth -= 1
                    self._open.discard(anchor)
            return node

    def construct_mapping(loader, node, deep=False):
        own = {id(k) for k, _ in node.value}
        loader.flatten_mapping(node)
        out = LocatedDict()
        out.line = node.start_mark.line + 1
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise InputError("a mapping key must be a plain value", line=key_node.start_mark.line + 1)
            line = key_node.start_mark.line + 1
            if key in out and id(key_node) in own and out.own.get(key):
                first = out.lines[key]
                if loader.duplicates == "error":
                    raise InputError(f"key {key!r} appears twice (lines {first} and {line}); YAML "
                                     "keeps only the second, silently", line=line, field=str(key),
                                     hint="remove one of them")
                out.duplicates.setdefault(key, [first]).append(line)
            out[key] = loader.construct_object(value_node, deep=True)
            out.lines[key] = line
            out.own[key] = id(key_node) in own
        return out

    def construct_sequence(loader, node, deep=False):
        out = LocatedList(loader.construct_object(child, deep=True) for child in node.value)
        out.line = node.start_mark.line + 1
        out.lines = [child.start_mark.line + 1 for child in node.value]
        return out

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, construct_sequence)
    return Loader


_LOADERS: dict[str, type] = {}


def _yaml_error(err, file: str | None) -> InputError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if "maximum nesting depth" in problem:  # libyaml's own bound (1,000 levels), met before ours
        lim = MODEL_LIMITS["yaml_depth"]
        return InputError(f"nested more than {lim.show(lim.value)} deep", file=file,
                          line=mark.line + 1 if mark is not None else None,
                          hint="no course file nests that deep")
    return InputError(f"not valid YAML: {problem}", file=file,
                      line=mark.line + 1 if mark is not None else None,
                      hint="check indentation and that every 'key: value' has a space after the colon")


def load_all_text(text: str, *, file: str | None = None, duplicates: str = "error") -> list[Any]:
    """Every document in ``text`` (multi-document YAML), with line information.

    Nesting deeper than ``COURSELIB_MAX_YAML_DEPTH`` (100) levels and aliases expanding to more
    than ``COURSELIB_MAX_YAML_ALIAS_NODES`` (10,000) nodes are refused with the line. A key that
    appears twice in one mapping is an error naming both lines (``duplicates="error"``), or, with
    ``duplicates="keep"``, recorded in the mapping's ``.duplicates`` (key -> lines) for readers
    that report it as a finding (:func:`duplicate_keys`).
    """
    import yaml

    if duplicates not in ("error", "keep"):
        raise ValueError(f"duplicates={duplicates!r}")
    loader_class = _LOADERS.get(duplicates)
    if loader_class is None:
        loader_class = type(f"Loader_{duplicates}", (_loader_class(),), {"duplicates": duplicates})
        _LOADERS[duplicates] = loader_class
    try:
        return list(yaml.load_all(text, Loader=loader_class))
    except yaml.YAMLError as err:
        raise _yaml_error(err, file) from None
    except InputError as err:
        raise err.located(file=file) from None
    except RecursionError:
        raise InputError("nested too deeply for this Python to read", file=file,
                         hint=f"lower {MODEL_LIMITS['yaml_depth'].env}") from None


def duplicate_keys(doc, path: str = "") -> list[tuple[str, Any, list[int]]]:
    """``(where, key, lines)`` for every key given twice in ``doc`` (loaded with ``duplicates="keep"``)."""
    out: list = []
    if isinstance(doc, LocatedDict):
        for key, lines in doc.duplicates.items():
            out.append((f"{path}.{key}" if path else str(key), key, lines))
        for key, value in doc.items():
            out += duplicate_keys(value, f"{path}.{key}" if path else str(key))
    elif isinstance(doc, LocatedList):
        for i, value in enumerate(doc):
            out += duplicate_keys(value, f"{path}[{i}]")
    return out


def read_text(path, kind: str = "text") -> str:
    """The text of ``path`` under the input policy for ``kind`` (:mod:`courselib.io.policy`)."""
    return _policy_read_text(path, kind)


def load_one(path, kind: str = "text") -> Any:
    """The single YAML document in ``path`` (an error if there are none or several)."""
    docs = [d for d in load_all_text(read_text(path, kind), file=str(path)) if d is not None]
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
                close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                raise self.error(key, f"unknown field '{key}'",
                                 hint=f"did you mean '{close[0]}'?" if close else
                                 "allowed: " + ", ".join(sorted(allowed)))

    def items(self) -> Iterator:
        return iter(self.m.items())

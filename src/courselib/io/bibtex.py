"""The course bibliography (``book/references.bib``) read as a learner's notebook cites it.

The website cites with sphinxcontrib-bibtex (``{cite}`young-1974``` in MyST); a notebook opened in
Jupyter shows that role as raw text. ``courselib labs build`` turns each citation in a student lab into
what the website prints, the author-year label (``Young, 1974``, ``NVIDIA, 2025b``), linked to the
source where it has an address, else followed by where it was published. This reader knows the subset
of BibTeX the course writes: ``@type{key,`` then ``field = {value},`` (braces nest; a bare number is a
value), authors as ``Last, First and ...`` or one braced name (``{{NVIDIA}}``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from courselib.errors import InputError
from courselib.io.policy import read_text

ENTRY = re.compile(r"^@(\w+)\s*\{\s*([^,\s]+)\s*,", re.M)
FIELD = re.compile(r"\s*(\w+)\s*=\s*")
URL = re.compile(r"\\url\{([^}]*)\}")
#: LaTeX the course's entries use, as plain text
_LATEX = ((r"\_", "_"), (r"\&", "&"), (r"\%", "%"), (r"\#", "#"), ("---", "—"), ("--", "–"), ("~", " "))


@dataclass(frozen=True)
class Source:
    """One entry, as a citation reads: who and the year, ``link`` (an address or None), ``venue``."""

    key: str
    who: str
    year: str
    link: str | None
    venue: str

    @property
    def label(self) -> str:
        """As the website's author-year citation prints it: ``Young, 1974``."""
        return f"{self.who}, {self.year}"

    def markdown(self, textual: bool = False) -> str:
        """The citation in Markdown: the label linked to the source, or the label and where it appeared.
        ``textual``: "Young (1974)", for a sentence that names the author (``{cite:t}``)."""
        text = f"{self.who} ({self.year})" if textual else self.label
        if self.link:
            return f"[{text}]({self.link})"
        return f"{text}, {self.venue}" if self.venue else text


def plain(value: str) -> str:
    """A field's value without braces, ``\\url{}`` and the LaTeX escapes the course uses."""
    value = URL.sub(r"\1", value)
    for latex, text in _LATEX:
        value = value.replace(latex, text)
    return " ".join(value.replace("{", "").replace("}", "").split())


def _braced(text: str, start: int, where: str) -> tuple[str, int]:
    """The value in the braces that open at ``text[start]``, and the index after its closing brace."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    raise InputError("a brace that is never closed", file=where)


def _fields(text: str, start: int, where: str) -> dict[str, str]:
    """The fields of the entry whose body begins at ``text[start]`` (just after ``key,``)."""
    out, i = {}, start
    while True:
        m = FIELD.match(text, i)
        if not m:
            rest = text[i:].lstrip()
            if rest.startswith("}"):
                return out
            raise InputError(f"expected 'field = {{value}}' or '}}', found {rest[:30]!r}", file=where)
        name, i = m.group(1).lower(), m.end()
        if text.startswith("{", i):
            value, i = _braced(text, i, where)
        else:
            bare = re.match(r"[\w.-]+", text[i:])
            if not bare:
                raise InputError(f"field {name!r} has no value in braces", file=where)
            value, i = bare.group(0), i + bare.end()
        out[name] = value
        i = re.match(r"\s*,?", text[i:]).end() + i


def split_authors(value: str) -> list[str]:
    """The names in an ``author`` field: split at `` and `` outside braces."""
    names, depth, start = [], 0, 0
    i = 0
    while i < len(value):
        c = value[i]
        depth += (c == "{") - (c == "}")
        if depth == 0 and value.startswith(" and ", i):
            names.append(value[start:i])
            start = i = i + 5
            continue
        i += 1
    names.append(value[start:])
    return [n.strip() for n in names if n.strip()]


def last_name(name: str) -> str:
    """A person's last name (``Young, John W.`` -> ``Young``); a braced name is kept whole."""
    if name.startswith("{") and name.endswith("}"):
        return plain(name)
    if "," in name:
        return plain(name.split(",", 1)[0])
    return plain(name.split()[-1])


def authors(fields: dict[str, str]) -> str:
    """Who an author-year citation names: ``Last``, ``A and B`` or ``A et al.``."""
    people = [last_name(n) for n in split_authors(fields.get("author") or fields.get("editor") or "")]
    return people[0] + " et al." if len(people) >= 3 else " and ".join(people)


def _venue(fields: dict[str, str]) -> str:
    where = plain(fields.get("journal") or fields.get("booktitle") or fields.get("publisher") or "")
    if fields.get("volume"):
        where += f" {plain(fields['volume'])}" + (f"({plain(fields['number'])})" if fields.get("number") else "")
    if fields.get("pages"):
        where += f", {plain(fields['pages'])}"
    return where.strip(", ")


def _link(fields: dict[str, str]) -> str | None:
    if fields.get("url"):
        return plain(fields["url"])
    found = URL.search(fields.get("howpublished", ""))
    if found:
        return found.group(1)
    if fields.get("doi"):
        return "https://doi.org/" + plain(fields["doi"])
    return None


def parse(text: str, file: str = "references.bib") -> dict[str, Source]:
    """Every entry of a bibliography's text, by key."""
    out: dict[str, Source] = {}
    for m in ENTRY.finditer(text):
        key = m.group(2)
        where = f"{file}:{text.count(chr(10), 0, m.start()) + 1}"
        if key in out:
            raise InputError(f"a second entry {key!r}", file=where)
        fields = _fields(text, m.end(), where)
        out[key] = Source(key, authors(fields), plain(fields.get("year", "n.d.")), _link(fields), _venue(fields))
    return out


def read(path) -> dict[str, Source]:
    """The bibliography at ``path`` (``book/references.bib``), by key."""
    return parse(read_text(path), str(path))


def beside(notebook) -> Path:
    """Where the course bibliography is for a notebook in ``solutions/`` (``../book/references.bib``)."""
    return Path(notebook).resolve().parent.parent / "book" / "references.bib"

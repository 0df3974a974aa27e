"""Every string that came from the student's process, made harmless before anyone reads it.

A student's exception name, message or ``repr`` can hold a carriage return, an ANSI escape (ESC),
a Unicode bidi override or a newline followed by a forged ``total 12/12`` line. :func:`text` turns
every control and format character into a visible escape (``\\x1b``, ``\\u202e``) and caps the length,
so a report line is one line and shows what the student wrote, not what it draws; :func:`multiline`
keeps the newlines of a written answer and nothing else; :func:`markdown` also escapes what a
Markdown table or HTML would interpret. JSON output then holds only these escaped strings.
"""
from __future__ import annotations

import unicodedata

LIMIT = 2000


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def _clean(value, keep: str, limit: int) -> str:
    try:
        s = value if isinstance(value, str) else str(value)
    except Exception:  # noqa: BLE001 — a student's __str__ may raise
        s = "<text that could not be read>"
    s = s[:limit * 2]
    out = "".join(ch if ch in keep or not unicodedata.category(ch).startswith(("C", "Z")) or ch == " "
                  else _escape(ch) for ch in s)
    return out if len(out) <= limit else out[:limit - 1] + "…"


def text(value, limit: int = LIMIT) -> str:
    """One printable line: controls, separators and format characters escaped, at most ``limit`` characters."""
    return _clean(value, "", limit)


def multiline(value, limit: int = 20_000) -> str:
    """A written answer: its line breaks kept, every other control or format character escaped."""
    return _clean(str(value).replace("\r\n", "\n"), "\n", limit)


_MARKDOWN = {"\\": "\\\\", "|": "\\|", "<": "&lt;", ">": "&gt;", "&": "&amp;", "`": "\\`", "*": "\\*",
             "_": "\\_", "[": "\\[", "]": "\\]", "#": "\\#", "~": "\\~"}


def markdown(value, limit: int = LIMIT) -> str:
    """One table cell of a Markdown summary: :func:`text`, then Markdown's and HTML's characters escaped."""
    return "".join(_MARKDOWN.get(ch, ch) for ch in text(value, limit))

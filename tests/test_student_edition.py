"""The student edition reuses the instructor edition's executed pages (book/_ext/course_build.py).

A gated solution (``solution-start`` … ``solution-end``, code cells between) is cut out of the student's
page after the page is parsed, so the page's notebook — which jupyter-cache keys on its code cells — is
the instructor's: the student edition runs no page a second time, and shows the same outputs without
the solution's text, code or output. A tiny book built twice with the course's extension shows it; the
whole book is checked the same way by tests/test_site.py's student-edition test.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from book_exec import jupyter_book

ROOT = Path(__file__).resolve().parents[1]

PAGE = '''---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
# A page

```{code-cell} ipython3
x = 6 * 7
print("before", x)
```

````{exercise}
:label: ex-one

What is x + 1?
````

```{solution-start} ex-one
:class: dropdown
```

```{code-cell} ipython3
y = x + 1
print("SOLUTION-OUTPUT", y)
```

The answer is SOLUTION-TEXT.

```{solution-end}
```

```{code-cell} ipython3
print("after", x)
```
'''

CONFIG = '''title: tiny
execute:
  execute_notebooks: cache
  cache: {cache}
  timeout: 60
sphinx:
  extra_extensions:
    - sphinx_exercise
  local_extensions:
    course_build: {ext}
  config:
    hide_solutions: {hide}
'''


def _build(book: Path, out: Path, cache: Path, hide: bool) -> tuple[str, str]:
    (book / "_config.yml").write_text(CONFIG.format(cache=cache, ext=ROOT / "book" / "_ext",
                                                    hide=str(hide).lower()))
    done = subprocess.run([*jupyter_book(), "build", str(book), "--path-output", str(out), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=600)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    return log, (out / "_build" / "html" / "page.html").read_text()


@pytest.fixture(scope="module")
def editions(tmp_path_factory):
    book, cache = tmp_path_factory.mktemp("book"), tmp_path_factory.mktemp("cache")
    (book / "page.md").write_text(PAGE)
    (book / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    return (_build(book, tmp_path_factory.mktemp("instructor"), cache, False),
            _build(book, tmp_path_factory.mktemp("student"), cache, True))


def test_the_student_edition_executes_nothing_the_instructor_edition_executed(editions):
    (log_i, _), (log_s, _) = editions
    assert "Executing notebook" in log_i
    assert "Executing notebook" not in log_s and "Using cached notebook" in log_s, log_s[-2000:]


def test_the_student_page_has_no_solution_and_the_same_other_outputs(editions):
    (_, inst), (_, stud) = editions
    cell = 'class="cell docutils container'
    assert (inst.count(cell), stud.count(cell)) == (3, 2)
    for shown in ("before 42", "after 42", 'class="exercise'):
        assert shown in inst and shown in stud, shown
    for hidden in ("SOLUTION-OUTPUT", "SOLUTION-TEXT", 'class="solution'):
        assert hidden in inst and hidden not in stud, hidden

"""labs/README.md's table says what each lab is: its level (the lab's title), its time
(courselib.course.LABS), its number of questions and its points, auto-graded + by hand
(labs/manifest.json). Found stale once: Lab 7 read 75 min, 5 questions, 10 + 3 points while the lab
had 100 min, 7 questions, 13 + 7."""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from courselib import course

ROOT = Path(__file__).resolve().parents[1]


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in (ROOT / "labs" / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*`(\d\d-[\w-]+)\.ipynb`\s*\|", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")]
    return rows


def _minutes(text: str) -> int:
    m = re.fullmatch(r"(\d+) (min|h)", text)
    assert m, f"labs/README.md: time {text!r} is not 'N min' or 'N h'"
    return int(m.group(1)) * (60 if m.group(2) == "h" else 1)


def test_the_labs_table_matches_the_labs():
    manifest = json.loads((ROOT / "labs" / "manifest.json").read_text())["labs"]
    rows = _rows()
    assert set(rows) == set(manifest), (sorted(rows), sorted(manifest))
    minutes = {Path(lab.doc).name: lab.minutes for lab in course.LABS}
    for name, cells in rows.items():
        questions = manifest[name]["questions"]
        auto = sum(q["points"] for q in questions if not q["manual"])
        by_hand = sum(q["points"] for q in questions if q["manual"])
        level, time, count, points = cells[2], cells[3], cells[5], cells[6]
        title = nbformat.read(ROOT / "labs" / f"{name}.ipynb", 4).cells[0].source.splitlines()[0]
        stated = re.match(r"# Lab \d \(([a-z]+)", title).group(1)
        assert level == stated, f"labs/README.md, {name}: level {level}, the lab's title says {stated}"
        assert _minutes(time) == minutes[name], f"labs/README.md, {name}: time {time}, the lab says {minutes[name]} min"
        assert int(count) == len(questions), f"labs/README.md, {name}: {count} questions, the lab has {len(questions)}"
        assert points == f"{auto} + {by_hand}", f"labs/README.md, {name}: points {points}, the lab has {auto} + {by_hand}"

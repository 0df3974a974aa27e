"""Every chapter in the table of contents executes without a cell error, and follows the book's rules.

Run one chapter: ``pytest tests/test_book.py -k 03``.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for ch in part.get("chapters", []):
            files.append(ch["file"])
            files += [s["file"] for s in ch.get("sections", [])]
    return files


def page_path(entry: str) -> Path:
    for ext in (".md", ".ipynb"):
        if (ROOT / (entry + ext)).exists():
            return ROOT / (entry + ext)
    raise FileNotFoundError(entry)


CHAPTERS = [f for f in toc_files() if re.match(r"book/\d\d-", f)]
# Labs are rendered but never executed at build (their checks fail until a student answers);
# tests/test_labs.py grades them instead.
NOTEBOOK_PAGES = [f for f in toc_files() if not f.startswith("labs/")
                  and (page_path(f).suffix == ".ipynb" or "kernelspec" in page_path(f).read_text()[:400])]


@pytest.mark.parametrize("entry", NOTEBOOK_PAGES)
def test_page_executes(entry):
    """Run as Jupyter Book runs it (in the page's own folder, the book's timeout), once per run: the
    execution is shared with the site's builds through one cache keyed on the sources (tests/book_exec.py)."""
    from book_exec import executed_page
    from lane_scope import lane_tmp, tmp_entries

    # in a lane's own temporary directory (make test's), nothing else writes there meanwhile: what the
    # page leaves in it, it would leave on a reader's machine (chapter 1's pretend /proc once did)
    place = lane_tmp()
    before = tmp_entries(place) if place else set()
    nb = executed_page(page_path(entry))  # AssertionError with the traceback on the first failing cell
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    if place:
        left = sorted(tmp_entries(place) - before)
        assert not left, f"executing the page left {left} in the temporary directory {place}"


@pytest.mark.parametrize("entry", CHAPTERS)
def test_chapter_follows_the_book_rules(entry):
    text = page_path(entry).read_text()
    assert "Learning objectives" in text, "a chapter opens with learning objectives"
    assert "**The crux.**" in text, "a chapter states its crux"
    assert len(re.findall(r"\{cite(:p|:t)?\}`", text)) >= 3, "at least three citations"
    assert len(re.findall(r"^`{3,4}\{exercise\}", text, flags=re.M)) >= 3, "at least three exercises"
    n_solutions = len(re.findall(r"^`{3,4}\{solution(-start)?\}", text, flags=re.M))
    assert n_solutions >= 3, "every exercise has a solution"
    assert re.search(r"\{glue:figure\}|\{figure\}", text), "at least one figure"
    assert "{term}`" in text, "links into the glossary"
    assert "popular account" in text.lower(), "says where the popular account is imprecise"
    for alt_block in re.findall(r"```\{glue:figure\}[^\n]*\n((?::[^\n]*\n)*)", text):
        assert ":alt:" in alt_block, "every figure has alt text"


def test_every_cited_key_is_in_the_bibliography():
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    assert len(keys) == len(re.findall(r"@\w+\{([^,]+),", bib)), "no duplicate keys"
    for page in (ROOT / "book").glob("*.md"):
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", page.read_text()):
            for key in group.split(","):
                assert key.strip() in keys, f"{page.name}: {key.strip()} is not in references.bib"


def _citation_label(entry) -> str:
    """What an author-year citation of ``entry`` reads as: "Last", "A and B" or "A et al.", then the year."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    last = [" ".join(p.last_names) or str(p) for p in people]
    who = last[0] + " et al." if len(last) >= 3 else " and ".join(last)
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


def test_no_two_citations_read_the_same():
    """Two sources must not both render as "The Kubernetes Authors, 2025": give them 2025a, 2025b."""
    from collections import defaultdict

    from pybtex.database import parse_file

    db = parse_file(str(ROOT / "book" / "references.bib"))
    by_label = defaultdict(list)
    for key, entry in db.entries.items():
        by_label[_citation_label(entry)].append(key)
    clashes = {label: keys for label, keys in by_label.items() if len(keys) > 1}
    assert not clashes, ("these entries would cite identically; add letters to their years (2025a, 2025b, "
                         f"in the order of their titles): {clashes}")


def _bib_keys() -> set[str]:
    return set(re.findall(r"@\w+\{([^,]+),", (ROOT / "book" / "references.bib").read_text()))


def test_practice_output_cites_the_bibliography_not_the_fact_sheet():
    """Readers see worked solutions on the pages: sources there are bibliography keys, never "FACTS §"."""
    from courselib import problems
    from courselib.problems import render

    keys, cited = _bib_keys(), set()
    for topic in problems.available():
        for difficulty in problems.DIFFICULTIES:
            for seed in range(4):
                p = problems.generate(topic, seed, difficulty)
                text = render.text(p, problems.solve(p))
                assert "FACTS" not in text, (topic, seed, difficulty)
                for group in re.findall(r"\[([a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:, [a-z][a-z0-9-]+)*)\]", text):
                    cited.update(k.strip() for k in group.split(","))
    assert cited, "worked solutions should name their sources"
    assert cited <= keys, f"not in references.bib: {sorted(cited - keys)}"


def test_no_page_shows_the_fact_sheet():
    """The fact sheet is the authors' notes; a page (prose, code or output) cites the bibliography instead."""
    pages = [*(ROOT / "book").glob("*.md"), *(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "labs").glob("*.ipynb")]
    offenders = [p.relative_to(ROOT).as_posix() for p in pages if "FACTS §" in p.read_text()]
    assert not offenders, f"'FACTS §' on a page: {offenders}"


def test_the_course_table_names_every_chapter_and_lab_of_the_toc():
    """courselib.course (times, prerequisites, the learning path) and _toc.yml describe the same course."""
    from courselib import course

    toc = toc_files()
    assert [c.doc for c in course.CHAPTERS] == [f for f in toc if re.match(r"book/\d\d-", f)]
    assert sorted(lab.doc for lab in course.LABS) == sorted(f for f in toc if f.startswith("labs/"))
    docs = {c.doc for c in course.CHAPTERS}
    for c in course.CHAPTERS:
        assert set(c.needs) <= docs and c.doc not in c.needs and c.read_min > 0 and c.exercises_min > 0
        assert all(docs_before.doc != c.doc for docs_before in course.CHAPTERS[course.CHAPTERS.index(c):]
                   if docs_before.doc in c.needs), f"{c.doc} needs a later chapter"
    assert all(lab.chapter in docs and lab.minutes > 0 for lab in course.LABS)
    keys = _bib_keys()
    assert all(p.where in keys for p in course.PREREQUISITES if p.where)


@pytest.mark.parametrize("entry", CHAPTERS)
def test_a_chapter_practises_its_own_topic(entry):
    """Chapter 1 practises namespaces and chapter 2 CPU limits, not the OOM killer that chapter 3 teaches."""
    from courselib import course

    text = page_path(entry).read_text()
    used = set(re.findall(r'render\.practice(?:_solution)?\("(\w+)"', text))
    used |= set(re.findall(r"courselib problem (\w+) --seed", text))
    assert used, "a chapter ends with a practice problem"
    assert used <= set(course.chapter(entry).practice), f"{entry} practises {used - set(course.chapter(entry).practice)}"


# ---- self-checks: answered by courselib at build time, recomputed here a second way ------------------

def _expected_self_check_answers() -> dict:
    """Each self-check's answer, recomputed from the rule by hand or through another courselib path."""
    import math

    from courselib.model import checkpoint, cost, cpu, nccl
    from courselib.model.badness import Task, select_victim
    from courselib.sim.gang import simulate
    from courselib.widgets.gang import default_workload

    pages_2g = 2 * 2 ** 30 // 4096
    w512, w2048 = (cpu.shares_to_weight(cpu.milli_cpu_to_shares(m)) for m in (500, 2000))
    return {
        "ch1-pid-inside": "1 and 0",
        "ch1-ps-inside": 3,
        "ch1-initial-ns": "the host's initial PID namespace",
        "ch2-cpu-max": "25000 100000",
        "ch2-burst": 100_000 / 4 / 1000,
        "ch2-weight": round(w512 / (w512 + w2048), 3),
        "ch3-adj-unit": pages_2g // 1000,
        "ch3-victim": "AB"[select_victim([Task("A", 300_000), Task("B", 100_000, oom_score_adj=350)], pages_2g).victim],
        "ch3-evicted": "exporter",            # exceeds its (zero) request, priority 0 < trainer's 1000
        "ch4-rebuild": 4,                     # COPY requirements, RUN pip, COPY src, CMD
        "ch4-code-edit": 2,                   # COPY src, CMD
        "ch4-driver": "the kernel and the GPU driver (its kernel module and its user-space libcuda)",
        "ch5-backfill": "short",              # ends at 7 h, before big's reservation at 8 h; long would end at 10 h
        "ch5-reason": "big: Resources; long: Priority",
        "ch5-timeout": 3600 + 30,             # --time=60 min, KillWait 30 s
        "ch6-deadlock": min(j.gpus_held for j in simulate(default_workload(nodes=75), "kube-default",
                                                          horizon=3 * 3600).jobs),
        "ch6-overcommit": "it stays Pending: 512 GPUs exceed the idle budget",   # 512 > 512 × 1.2 − 112
        "ch6-annotation": "`scheduling.k8s.io/group-name: train`, in the Job's pod template's metadata",
        "ch6-gate-off": "it accepts the Job and silently drops the field: the pods are scheduled one at a time",
        # a second way: no pod of either gang is bound before its gang starts training
        "ch6-gang-holds": 0 if all(j.first_bound is not None and j.first_bound >= j.start
                                   for j in simulate(default_workload(nodes=75), "kube-gang", horizon=3 * 3600).jobs)
        else -1,
        "ch7-silent": 30 + 600,               # the rest of the step, then the watchdog
        "ch7-error": round(30 + 4.096e-6 * 2 ** 20 * 8, 1),
        "ch7-rendezvous": f"in torchrun's rendezvous, {nccl.RENDEZVOUS_JOIN_TIMEOUT_S / 60:g} min (its join_timeout)",
        "ch8-waste": round(400 * 25 / 60, 2),
        "ch8-job-mtbf": round(16_384 * 54 / 419 / 512, 2),
        "ch8-young": round(math.sqrt(2 * 60 * 7200) / 60, 2),
        "ch9-level": "quota: a workload is admitted only if quota for all its pods is free",
        "ch9-zero-waste": "volcano, kueue and slurm",
        "ch9-tpu-slice": "it cannot run until every instance of the slice is recreated or rescheduled",
        "_uses": (checkpoint, cost),
    }


def test_every_self_check_is_answered_the_same_way_twice():
    from courselib.static import selfchecks

    expected = _expected_self_check_answers()
    assert set(selfchecks.ids()) == set(expected) - {"_uses"}
    for cid in selfchecks.ids():
        c = selfchecks.get(cid)
        if c.kind == "choice":
            assert len(set(c.choices)) == len(c.choices) >= 2 and 0 <= c.answer < len(c.choices), cid
            assert c.answer_text == expected[cid], cid
        else:
            assert c.kind == "number" and math.isfinite(c.answer), cid
            assert abs(c.answer - expected[cid]) <= max(c.tolerance, 1e-9), (cid, c.answer, expected[cid])
        assert c.question.strip() and c.why.strip(), cid


@pytest.mark.parametrize("entry", CHAPTERS)
def test_a_chapter_has_two_or_three_self_checks_that_work_without_a_kernel(entry):
    import importlib.util
    import sys

    from courselib.static import selfchecks

    text = page_path(entry).read_text()
    used = re.findall(r"^```\{self-check\} ([\w-]+)\s*$", text, flags=re.M)
    assert 2 <= len(used) <= 3, f"{entry}: {len(used)} self-checks"
    spec = importlib.util.spec_from_file_location("course_checks", ROOT / "book" / "_ext" / "course_checks.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("course_checks", mod)
    spec.loader.exec_module(mod)
    for cid in used:
        c = selfchecks.get(cid)
        assert c.chapter == Path(entry).name[:2], f"{cid} belongs to chapter {c.chapter}"
        page = mod.self_check_html(c)
        assert f'data-answer="{int(c.answer) if c.kind == "choice" else repr(c.answer)}"' in page
        assert "<details" in page and "Show the answer" in page      # readable with JavaScript off


def test_no_self_check_is_used_twice():
    used = [cid for f in CHAPTERS for cid in re.findall(r"^```\{self-check\} ([\w-]+)", page_path(f).read_text(), flags=re.M)]
    assert len(used) == len(set(used))


# ---- the shape of a chapter: at a glance, takeaways, further reading ------------------------------

@pytest.mark.parametrize("entry", CHAPTERS)
def test_a_chapter_opens_with_its_time_and_closes_with_takeaways_and_further_reading(entry):
    text = page_path(entry).read_text()
    glance, crux = text.find("```{chapter-glance}"), text.find("**The crux.**")
    assert 0 <= glance < crux, "the {chapter-glance} box (time, what to read first) comes before the crux"
    practice = text.find("\n## Practice")
    takeaways = [m.start() for m in re.finditer(r"^```\{admonition\} Key takeaways$", text, flags=re.M)]
    assert len(takeaways) == 1 and takeaways[0] > practice > 0, "one Key takeaways box, after the practice problem"
    box = text[takeaways[0]:text.index("\n```\n", takeaways[0])]
    assert ":class: important" in box and len(re.findall(r"^- ", box, flags=re.M)) >= 3, "three or more takeaways"
    reading = text.find("\n## Further reading")
    assert reading > takeaways[0], "a Further reading section closes the chapter"
    section = text[reading:]
    keys = re.findall(r"\{cite:t\}`([^`]+)`", section)
    assert len(keys) >= 2, "at least two further readings, each a bibliography entry"
    assert {k.strip() for g in keys for k in g.split(",")} <= _bib_keys()


def _myths(text: str) -> list[str]:
    i = text.find("## Where the popular account is imprecise")
    if i < 0:
        return []
    j = text.find("\n## ", i + 5)
    return re.findall(r'^\s*[-*]?\s*\*\*"([^"]+)"\*\*', text[i:j if j > 0 else None], flags=re.M)


def test_each_imprecise_popular_claim_is_answered_in_one_place():
    """A myth is debunked once, where it belongs; other chapters link to it instead of repeating it."""
    seen: dict[str, str] = {}
    for entry in CHAPTERS:
        for myth in _myths(page_path(entry).read_text()):
            key = re.sub(r"\W+", " ", myth.lower()).strip()
            assert key not in seen, f'"{myth}" is answered in both {seen[key]} and {entry}: link instead'
            seen[key] = entry
    assert len(seen) >= 9


def test_the_intro_page_shows_the_learning_path_prerequisites_and_times():
    text = (ROOT / "book" / "intro.md").read_text()
    assert "## Before you start" in text and "course.PREREQUISITES" in text
    assert "learning_path()" in text and "{glue:figure} intro_path" in text and ":alt:" in text
    assert "course.CHAPTERS" in text and "course.labs_for" in text     # time per chapter and per lab


def _solution_prose(text: str) -> list[str]:
    blocks = re.findall(r"```\{solution-start\}.*?```\{solution-end\}", text, flags=re.S)
    blocks += re.findall(r"````\{solution\}.*?\n````", text, flags=re.S)
    out = []
    for b in blocks:
        b = re.sub(r"```\{code-cell\}.*?\n```", "", b, flags=re.S)
        b = re.sub(r"```\w*\n.*?\n```", "", b, flags=re.S)
        out.append(re.sub(r"\{glue:text\}`[^`]+`", "G", b))
    return out


@pytest.mark.parametrize("entry", CHAPTERS)
def test_worked_solutions_compute_their_results(entry):
    """'Nothing is typed in by hand': a solution's arithmetic ends in a glued value, not a typed one."""
    arithmetic = re.compile(r"\d[\d.,]*\s*(?:[A-Za-zµ%]{1,6}\s*)?[×+−*/]\s*\d[\d.,]*\s*(?:[A-Za-zµ%]{1,6}\s*)?"
                            r"(?:[×+−*/]\s*\d[\d.,]*\s*(?:[A-Za-zµ%]{1,6}\s*)?)*=\s*\d")
    typed = [m.group(0) for prose in _solution_prose(page_path(entry).read_text()) for m in arithmetic.finditer(prose)]
    assert not typed, f"{entry}: typed results {typed}; compute them in the solution's cell and glue them"

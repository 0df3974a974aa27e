"""Per-student variants (issue 33): a seed in the notebook's metadata, the lab's numbers from it, the
checks' expected values from the same seed, and a grader that refuses a notebook of another seed.

Lab 8 carries both cells (its numbers drawn per seed: the story's batches, the scheduler model's cluster
and blocker, the week's prices), which is what a lab with variants looks like (solutions/README.md).
"""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from courselib.errors import InputError
from courselib.grading import build, markers, variant
from courselib.grading.grade import grade

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "solutions").is_dir():
    pytest.skip("no solutions/ here (the student template)", allow_module_level=True)
LAB = "08-gang-cost"

def lab_with_variants():
    """Lab 8's solution: its story cell is tagged `parameters`, and a `variant` cell follows it."""
    nb = nbformat.read(ROOT / "solutions" / f"{LAB}.ipynb", 4)
    assert any(variant.PARAMETERS_TAG in markers.tags(c) for c in nb.cells)
    assert any(variant.VARIANT_TAG in markers.tags(c) for c in nb.cells)
    return copy.deepcopy(nb)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course folder: solutions/LAB.ipynb with variants, and its built labs/."""
    root = tmp_path_factory.mktemp("course")
    (root / "solutions").mkdir()
    nbformat.write(lab_with_variants(), str(root / "solutions" / f"{LAB}.ipynb"))
    build.build_all(root / "solutions", root / "labs")
    return root


def cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "courselib", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_the_rng_is_the_same_everywhere_forever():
    rng = variant.Rng(7)
    assert [rng.integer(1, 100) for _ in range(5)] == [80, 20, 100, 70, 19]
    assert variant.Rng(7).pick("abcdef") == variant.Rng(7).pick("abcdef")
    assert variant.seed_of("17") == 17 and variant.seed_of(17) == 17
    assert variant.seed_of("alice") == variant.seed_of(" alice ") != variant.seed_of("bob")
    with pytest.raises(InputError, match="empty seed"):
        variant.seed_of("  ")


def test_the_parameters_cell_is_rewritten_line_by_line():
    src = "# the story\nA = 1  # GPUs\nB = (1.5, 2.0)\nC = A * 2\n"
    assert variant.rewrite(src, {"A": 8, "B": (3.0, 4.5)}, "x") == "# the story\nA = 8  # GPUs\nB = (3.0, 4.5)\nC = A * 2\n"
    assert variant.defaults(src, "x") == {"A": 1, "B": (1.5, 2.0)}
    with pytest.raises(InputError, match="does not assign"):
        variant.rewrite(src, {"D": 1}, "x")
    with pytest.raises(InputError, match="not a plain literal"):
        variant.rewrite(src, {"A": object()}, "x")
    with pytest.raises(InputError, match=r"\{\{NOPE\}\} is not a name"):
        variant.fill("x {{NOPE}}", {"A": 1}, "x")


def test_seed_0_is_todays_lab(course):
    """The default seed gives the lab as it is (only the placeholder this test added is filled)."""
    lab = json.loads((course / "labs" / f"{LAB}.ipynb").read_text())
    assert "seed" not in lab["metadata"]["course"]
    assert "A 512-GPU training job" in "".join("".join(c["source"]) for c in lab["cells"])
    assert not any(variant.VARIANT_TAG in c.get("metadata", {}).get("tags", []) for c in lab["cells"])
    manifest = json.loads((course / "labs" / "manifest.json").read_text())["labs"][LAB]
    assert manifest["parameters"] and "def variant(rng)" in manifest["variant"]


def _variant(course, seed, out: Path, solved=False) -> dict:
    args = ["labs", "variant", LAB, "--seed", str(seed), "-o", str(out)] + (["--solution"] if solved else [])
    done = cli(*args, cwd=course)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def _numbers(nb: dict) -> dict:
    story = next(c for c in nb["cells"] if variant.PARAMETERS_TAG in c.get("metadata", {}).get("tags", []))
    return variant.defaults("".join(story["source"]), "test")


def _literal_q2(nb: dict, value: tuple[float, float]) -> None:
    """The student answered question 2 with numbers (not a formula)."""
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "story_cost_usd = " in src:
            cell["source"] = f"story_idle_gpu_hours, story_cost_usd = {value!r}\n"


def test_a_student_variant_shows_their_numbers_and_records_the_seed(course, tmp_path):
    nb = _variant(course, 12345, tmp_path / f"{LAB}.ipynb")
    assert nb["metadata"]["course"]["seed"] == 12345
    numbers = _numbers(nb)
    assert numbers != variant.defaults(
        "".join(next(c for c in json.loads((course / "labs" / f"{LAB}.ipynb").read_text())["cells"]
                     if variant.PARAMETERS_TAG in c["metadata"].get("tags", []))["source"]), "t")
    text = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert f"A {numbers['GANG_GPUS']}-GPU training job" in text
    assert "def variant" not in json.dumps(nb)


def covering_seeds(solution, pool=range(1, 1001), few: int = 6, band: float = 0.05) -> tuple[list[int], set]:
    """Few seeds that between them draw every number of the lab's ``variant(rng)`` that matters: each
    value of a parameter that takes at most ``few`` values over ``pool`` (the gang, the nodes, the delay
    price), and for every other parameter a value in the lowest and one in the highest ``band`` of its
    range (the shortest and the longest wait, the cheapest and the dearest GPU-hour). A greedy set
    cover over ``pool``: deterministic for a given lab, it changes when the lab's variant cell does.
    Returns the seeds and the (parameter, value or end) pairs they cover."""
    cells = {tag: next(c for c in solution.cells if tag in markers.tags(c)).source
             for tag in (variant.PARAMETERS_TAG, variant.VARIANT_TAG)}
    ns: dict = {}
    exec(cells[variant.VARIANT_TAG], ns)  # noqa: S102 (the course's own lab)
    base = variant.defaults(cells[variant.PARAMETERS_TAG], LAB)
    values = {s: {**base, **ns["variant"](variant.Rng(s))} for s in pool}
    features: dict[str, callable] = {}
    for name in base:
        seen = sorted({v[name] for v in values.values()})
        if len(seen) <= few:
            for x in seen:
                features[f"{name}={x}"] = lambda v, name=name, x=x: v[name] == x
        else:
            lo, hi = seen[0], seen[-1]
            width = band * (hi - lo)
            features[f"{name} low"] = lambda v, name=name, t=lo + width: v[name] <= t
            features[f"{name} high"] = lambda v, name=name, t=hi - width: v[name] >= t
    covers = {s: {f for f, hit in features.items() if hit(v)} for s, v in values.items()}
    left, chosen = set(features), []
    while left:
        best = max(pool, key=lambda s: (len(covers[s] & left), -s))
        chosen.append(best)
        left -= covers[best]
    return chosen, set(features)


def test_the_covering_seeds_cover_every_value_and_both_ends():
    nb = lab_with_variants()
    seeds, wanted = covering_seeds(nb)
    again, _ = covering_seeds(nb)
    assert seeds == again and len(seeds) < 19
    assert {"GANG_GPUS=256", "GANG_GPUS=1024", "WAIT_MINUTES low", "WAIT_MINUTES high",
            "USD_PER_GPU_HOUR low", "DELAY_USD_PER_HOUR=4000.0"} <= wanted
    # seeds 2-20 (the list this replaced) never drew a wait in the lowest 5 % of its range
    waits = [variant.values_for(*_cells(), s, LAB)["WAIT_MINUTES"] for s in range(2, 21)]
    assert min(waits) > 24 + 0.05 * (95 - 24)
    chosen = [variant.values_for(*_cells(), s, LAB)["WAIT_MINUTES"] for s in seeds]
    assert min(chosen) <= 24 + 0.05 * (95 - 24) and max(chosen) >= 95 - 0.05 * (95 - 24)


def _cells():
    nb = lab_with_variants()
    return tuple(next(c for c in nb.cells if tag in markers.tags(c)).source
                 for tag in (variant.PARAMETERS_TAG, variant.VARIANT_TAG))


@pytest.mark.parametrize("which", [pytest.param("1-seed", id="1-seed"),
                                   pytest.param("covering", id="covering-seeds", marks=pytest.mark.slow)])
def test_every_seeds_solution_scores_full_marks_and_its_untouched_lab_zero(course, tmp_path, which):
    """Seed 1, and the seeds that between them draw every value and both ends of every range of the lab's
    variant (:func:`covering_seeds`: 6 seeds where seeds 2-20 ran before, and those never drew a wait in the
    lowest 5 % of its range).
    The notebooks are made in-process by the function ``courselib labs variant`` calls (the command
    itself is tested above and below); each is graded as a class's would be."""
    solution = nbformat.read(course / "solutions" / f"{LAB}.ipynb", 4)
    seeds = [1] if which == "1-seed" else covering_seeds(solution)[0]
    for seed in seeds:
        (tmp_path / str(seed)).mkdir()
        solved = tmp_path / str(seed) / f"{LAB}.ipynb"
        solved.write_text(build.variant_text(solution, f"solutions/{LAB}.ipynb", seed, solved=True)[0])
        report = grade(solved, source=course / "solutions")
        assert (report.seed, report.total, report.max_points) == (seed, 12, 12), report
        untouched = tmp_path / f"{LAB}.ipynb"
        untouched.write_text(build.variant_text(solution, f"solutions/{LAB}.ipynb", seed)[0])
        assert json.loads(untouched.read_text())["metadata"]["course"]["seed"] == seed
        assert grade(untouched, source=course / "solutions").total == 0


def test_an_answer_right_for_seed_a_is_wrong_for_seed_b(course, tmp_path):
    a, b = (_variant(course, s, tmp_path / f"{s}.ipynb", solved=True) for s in (101, 202))
    for name in "ab":
        (tmp_path / name).mkdir()
    na, nb_ = _numbers(a), _numbers(b)
    assert na != nb_

    def right(n):
        hours = (n["FIRST_BATCH_GPUS"] * n["WAIT_MINUTES"]
                 + n["SECOND_BATCH_GPUS"] * (n["WAIT_MINUTES"] - n["SECOND_BATCH_MINUTE"])) / 60
        return hours, hours * n["USD_PER_GPU_HOUR"]

    _literal_q2(a, right(na))
    _literal_q2(b, right(na))          # the classmate's number, in student B's notebook
    for nb, name in ((a, "a"), (b, "b")):
        (tmp_path / name / f"{LAB}.ipynb").write_text(json.dumps(nb))
    ra = grade(tmp_path / "a" / f"{LAB}.ipynb", source=course / "solutions")
    rb = grade(tmp_path / "b" / f"{LAB}.ipynb", source=course / "solutions")
    q2 = {r.question: r for r in ra.questions}["q2"], {r.question: r for r in rb.questions}["q2"]
    assert q2[0].passed and not q2[1].passed, (q2, na, nb_)
    assert ra.total == 12 and rb.total == 10


def test_the_grader_refuses_a_notebook_of_another_seed(course, tmp_path):
    nb = _variant(course, 7, tmp_path / f"{LAB}.ipynb", solved=True)
    assert nb["metadata"]["course"]["seed"] == 7
    with pytest.raises(InputError, match="variant for seed 7, not for seed 8") as err:
        grade(tmp_path / f"{LAB}.ipynb", source=course / "solutions", seed=8)
    assert err.value.field == "metadata.course.seed"
    done = cli("grade", str(tmp_path / f"{LAB}.ipynb"), "--source", "solutions", "--seed", "8", cwd=course)
    assert done.returncode == 2 and done.stdout == ""
    assert f"{LAB}.ipynb" in done.stderr and "metadata.course.seed" in done.stderr and "seed 7" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    # the right seed, said explicitly or read from the metadata, grades it
    assert grade(tmp_path / f"{LAB}.ipynb", source=course / "solutions", seed=7).total == 12
    assert grade(tmp_path / f"{LAB}.ipynb", source=course / "solutions").seed == 7


def test_a_login_is_a_seed(course, tmp_path):
    nb = _variant(course, "octocat", tmp_path / f"{LAB}.ipynb", solved=True)
    assert nb["metadata"]["course"]["seed"] == variant.seed_of("octocat")
    assert grade(tmp_path / f"{LAB}.ipynb", source=course / "solutions", seed="octocat").total == 12


def test_the_grader_takes_the_numbers_from_the_instructor_not_the_students_cell(course, tmp_path):
    """A student who edits the parameters cell (to numbers they like) is graded with the seed's numbers."""
    nb = _variant(course, 33, tmp_path / f"{LAB}.ipynb", solved=True)
    n = _numbers(nb)
    for cell in nb["cells"]:
        if variant.PARAMETERS_TAG in cell["metadata"].get("tags", []):
            cell["source"] = "".join(cell["source"]).replace(
                f"FIRST_BATCH_GPUS = {n['FIRST_BATCH_GPUS']}", "FIRST_BATCH_GPUS = 0")
    _literal_q2(nb, (n["SECOND_BATCH_GPUS"] * (n["WAIT_MINUTES"] - n["SECOND_BATCH_MINUTE"]) / 60,
                     n["SECOND_BATCH_GPUS"] * (n["WAIT_MINUTES"] - n["SECOND_BATCH_MINUTE"]) / 60 * n["USD_PER_GPU_HOUR"]))
    (tmp_path / f"{LAB}.ipynb").write_text(json.dumps(nb))
    report = grade(tmp_path / f"{LAB}.ipynb", source=course / "solutions")
    assert {r.question: r.passed for r in report.questions}["q2"] is False


def test_variant_refuses_what_it_cannot_do(course, tmp_path):
    done = cli("labs", "variant", "99-nope", "--seed", "1", "-o", str(tmp_path / "x.ipynb"), cwd=course)
    assert done.returncode == 2 and "99-nope" in done.stderr and "Traceback" not in done.stderr
    done = cli("labs", "variant", LAB, "--seed", "1", "-o", str(tmp_path / "x.txt"), cwd=course)
    assert done.returncode == 2 and "-o" in done.stderr
    bad = lab_with_variants()
    cell = next(c for c in bad.cells if variant.VARIANT_TAG in markers.tags(c))
    cell.source = cell.source.replace('"GANG_GPUS"', '"NOT_A_PARAMETER"')
    with pytest.raises(InputError, match="NOT_A_PARAMETER"):
        build.variant_text(bad, "solutions/x.ipynb", 5)

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


@pytest.mark.parametrize("seeds", [pytest.param(range(1, 2), id="1-seed"),
                                   pytest.param(range(2, 21), id="19-more-seeds", marks=pytest.mark.slow)])
def test_every_seeds_solution_scores_full_marks_and_its_untouched_lab_zero(course, tmp_path, seeds):
    for seed in seeds:
        (tmp_path / str(seed)).mkdir()
        solved = tmp_path / str(seed) / f"{LAB}.ipynb"
        _variant(course, seed, solved, solved=True)
        report = grade(solved, source=course / "solutions")
        assert (report.seed, report.total, report.max_points) == (seed, 12, 12), report
        untouched = tmp_path / f"{LAB}.ipynb"
        _variant(course, seed, untouched)
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

"""The course's shape in one place: chapters, what each needs first, how long each takes, and the labs.

The intro page draws the learning path from this table, every chapter's "at a glance" box reads its
own row (``{chapter-glance}`` in ``book/_ext/course_checks.py``), and tests/test_book.py checks that it
names every chapter and lab of ``_toc.yml``. Times are the authors' estimates for a reader who runs
every cell: minutes to read and run the chapter, and minutes for its exercises and practice problem.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chapter:
    doc: str                         # book/NN-name, as in _toc.yml
    short: str                       # a few words for the learning-path figure
    part: str                        # the _toc.yml part it belongs to
    read_min: int
    exercises_min: int
    needs: tuple[str, ...] = ()      # chapters to read first (doc names)
    practice: tuple[str, ...] = ()   # the courselib problem topics that practise this chapter

    @property
    def number(self) -> str:
        return self.doc.split("/")[-1][:2]


@dataclass(frozen=True)
class Lab:
    doc: str                         # labs/NN-name, as in _toc.yml
    short: str
    chapter: str                     # the chapter it practises (doc name)
    minutes: int

    @property
    def grade_command(self) -> str:
        """How a student grades their own copy of this lab (:data:`GRADE_OWN`)."""
        return GRADE_OWN.format(lab=self.doc.split("/")[-1])


#: The one command a student grades their own lab with, in a terminal in the course's folder, and the only
#: one the labs, labs/README.md, README.md and the intro show. ``courselib`` is on the terminal's PATH in
#: JupyterLab as ``make lab`` starts it (it puts .venv/bin first), on Binder and on the class hub; in a shell
#: of one's own, after ``source .venv/bin/activate``. ``--same-user``: the student's code runs as the
#: student (a grader that is not root needs it).
GRADE_OWN = "courselib grade --same-user labs/{lab}.ipynb"


@dataclass(frozen=True)
class Prerequisite:
    what: str
    where: str | None                # a bibliography key (None: nothing to cite)
    why: str


PARTS = ("The machine underneath", "Scheduling a gang", "Choosing")

CHAPTERS = (
    Chapter("book/01-container-is-a-process", "a container is a process", PARTS[0], 30, 30,
            practice=("namespaces",)),
    Chapter("book/02-cgroups", "cgroups: limits", PARTS[0], 35, 30, ("book/01-container-is-a-process",),
            practice=("cpu",)),
    Chapter("book/03-oom-killer", "the OOM killer, OOMKilled", PARTS[0], 50, 40, ("book/02-cgroups",),
            practice=("oom", "qos")),
    Chapter("book/04-images", "images and layers", PARTS[0], 35, 30, ("book/01-container-is-a-process",),
            practice=("layers",)),
    Chapter("book/05-slurm", "Slurm: the whole job", PARTS[1], 65, 45, practice=("backfill",)),
    Chapter("book/06-gang-deadlock", "the gang deadlock", PARTS[1], 80, 40, ("book/05-slurm",), practice=("gang",)),
    Chapter("book/06-native-gang-and-failures", "native gangs, failures", PARTS[1], 40, 25,
            ("book/06-gang-deadlock",), practice=("gang",)),
    Chapter("book/07-nccl-barrier", "the NCCL barrier", PARTS[1], 75, 45,
            ("book/03-oom-killer", "book/06-native-gang-and-failures"), practice=("barrier",)),
    Chapter("book/08-cost", "what it costs", PARTS[1], 45, 35, ("book/06-gang-deadlock", "book/07-nccl-barrier"),
            practice=("cost", "checkpoint")),
    Chapter("book/09-choosing", "choosing a scheduler", PARTS[2], 55, 30,
            ("book/05-slurm", "book/06-gang-deadlock", "book/06-native-gang-and-failures", "book/08-cost"), practice=("gang", "backfill")),
)

LABS = (   # in the chapters' order; each lab's title states the same level and time (tests/test_labs.py)
    Lab("labs/01-namespaces-cgroups", "what a container sees, what a quota does", "book/02-cgroups", 30),
    Lab("labs/03-oom-killer", "the OOM killer", "book/03-oom-killer", 35),
    Lab("labs/04-images", "the fewest rebuilds", "book/04-images", 45),
    Lab("labs/05-slurm", "reading Slurm's queue", "book/05-slurm", 45),
    Lab("labs/06-gang-deadlock", "gang deadlock", "book/06-gang-deadlock", 65),
    Lab("labs/07-barrier", "barrier and lost rank", "book/07-nccl-barrier", 100),
    Lab("labs/08-gang-cost", "a partial gang's cost", "book/08-cost", 100),
    Lab("labs/09-capstone", "capstone: choose a scheduler", "book/09-choosing", 120),
)

PREREQUISITES = (
    Prerequisite("What a process is, and how a process gets memory (OSTEP chapters 4–5, 13)", "ostep",
                 "chapters 1–3 extend exactly these two ideas: a restricted view, and limits on memory"),
    Prerequisite("Kubernetes Pods and Jobs", "k8s-docs-pods",
                 "chapters 3 and 6 read pod specs and a Job's pod template"),
    Prerequisite("Running Python and a shell", None,
                 "every page is a notebook you can run; the course's command is `courselib`"),
)


def chapter(doc_or_number: str) -> Chapter:
    """A chapter by its doc name (``book/03-oom-killer``), file stem (``03-oom-killer``) or number (``03``)."""
    for c in CHAPTERS:
        if doc_or_number in (c.doc, c.doc.split("/")[-1], c.number):
            return c
    raise KeyError(f"no chapter {doc_or_number!r} in courselib.course.CHAPTERS")


def labs_for(doc: str) -> tuple[Lab, ...]:
    return tuple(lab for lab in LABS if lab.chapter == chapter(doc).doc)


def total_minutes() -> tuple[int, int]:
    """(chapters read and run, exercises and labs), in minutes."""
    return (sum(c.read_min for c in CHAPTERS),
            sum(c.exercises_min for c in CHAPTERS) + sum(lab.minutes for lab in LABS))


def hours(minutes: int) -> str:
    """``95`` -> ``1 h 35 min``; ``40`` -> ``40 min``."""
    h, m = divmod(int(minutes), 60)
    return f"{h} h {m} min" if h and m else (f"{h} h" if h else f"{m} min")

"""Labs and their grading: solution markers, the student-lab build, variants, and the grader.

Modules:

- :mod:`~courselib.grading.markers` — the lab format: ``# BEGIN SOLUTION`` / ``# END SOLUTION`` regions
  in answer cells, check cells tagged ``check`` with ``{"course": {"question", "points"}}``.
- :mod:`~courselib.grading.notebook` — reading and writing notebooks; :mod:`~courselib.grading.manifest`
  — what the grader trusts, as pure data; :mod:`~courselib.grading.build` — ``solutions/*.ipynb`` →
  ``labs/*.ipynb`` and manifests (``courselib labs build``); :mod:`~courselib.grading.source` — where a
  grading's manifest comes from; :mod:`~courselib.grading.variant` — per-student seeds and numbers.
- :mod:`~courselib.grading.grade` — score a lab (``courselib grade``); :mod:`~courselib.grading.sandbox`,
  :mod:`~courselib.grading.jail`, :mod:`~courselib.grading.worker` — where the student's code runs;
  :mod:`~courselib.grading.encode` — answers as data; :mod:`~courselib.grading.safe` — escaping;
  :mod:`~courselib.grading.files` — how reports are written; :mod:`~courselib.grading.checks` — helpers
  the check cells use.

Threat model (issue 36). A grade must mean that the student's own answers passed the instructor's
checks. The student controls their notebook — every cell, its metadata, outputs, file name and type —
and, while it is graded, the code in it. The three places a lab is graded differ in what else the
student controls, and so in where the checks must come from:

1. **The instructor's machine** (``courselib grade``, ``--many``; root, or an ordinary user). The student
   controls only the submitted files. The checks come from the instructor's ``solutions/`` or a
   manifest given with ``--source``, or the grader's working folder — never from a folder beside the
   submission (a student can put a ``solutions/`` or ``manifest.json`` there). A submission that is a
   symlink, a hard link, a FIFO or a device is refused. As root the student's code runs as a separate,
   unprivileged uid; as an ordinary user only with ``--same-user`` (a warning in the report).
2. **The student's own repository's CI** (plain GitHub Actions, ``.github/workflows/grade.yml``). The
   student controls **every** file there, the workflow included: the run is feedback, not a grade of
   record. The workflow takes the list of labs and the checks from the instructor's repository at a
   pinned commit when configured, starts from an empty ``_grades/``, and grades every lab the course
   has (a missing lab scores 0); nothing committed by the student (a manifest, ``solutions/``,
   ``_grades/``) is trusted. Hidden checks and the grade of record stay on the instructor's side.
3. **An autograder service** (Gradescope's ``run_autograder``; a Classroom 50 ``autograder.py``). The
   checks — hidden ones included — come inside the bundle the instructor built (``courselib labs
   gradescope``); the student controls the submitted notebook only. The grader runs as root there, so
   the student's code runs as a separate uid, in the same sandbox.

Everywhere, the student's code runs in the sandbox: its own mount, PID, IPC and network namespaces; a
read-only view of only what Python and courselib need (so the checkout's ``.git``, ``solutions/``, other
submissions, hidden checks and the grader's own state are absent, not merely hidden); a private
writable ``HOME`` and ``TMPDIR`` that vanish with it; a clean environment; limits; killed with every
process it started before any report exists. It **fails closed**: a process that cannot be started as
asked gives that student zero points with the reason, never a weaker sandbox. Questions, points and
checks come from the trusted manifest; the checks run in the grader on the answers as data (never a
module a student's object names); expected values are computed on the instructor's side (hidden checks,
from the seed's numbers); every string from the student's process is escaped before a terminal, a
Markdown summary or JSON; the worker channel is bounded (size, nesting). Files the grader writes are
created ``O_EXCL|O_NOFOLLOW`` and renamed into place, in folders other users cannot write; its locks
live in a root-only folder. ``tests/test_grading_attacks.py`` keeps each of these honest.

nbformat and nbclient are imported only by the functions that need them.
"""

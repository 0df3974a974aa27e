"""Labs and their grading: solution markers, the student-lab build, and the grader.

- :mod:`courselib.grading.markers` — the lab format: ``# BEGIN SOLUTION`` / ``# END SOLUTION``
  regions in answer cells, check cells tagged ``check`` with ``{"course": {"question", "points"}}``.
- :mod:`courselib.grading.build` — ``solutions/*.ipynb`` → ``labs/*.ipynb`` (``courselib labs build``).
- :mod:`courselib.grading.grade` — execute a copy of a lab and score its check cells
  (``courselib grade``).
- :mod:`courselib.grading.checks` — small helpers the check cells use to word their feedback.

nbformat and nbclient are imported only by the functions that need them.
"""

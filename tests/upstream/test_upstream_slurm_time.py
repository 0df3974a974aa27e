"""Slurm's own parse_time test table (and the forms parse_time.c accepts) against courselib."""
from __future__ import annotations

import pytest
from upstream_cases import judge, params

from courselib.errors import InputError
from courselib.io.sbatch import parse_sbatch, time_str2secs


def _secs(text):
    try:
        secs, _ = time_str2secs(text)
    except InputError:
        return "NO_VAL"
    return "INFINITE" if secs is None else secs


def _sbatch_minutes(text):
    """What the sbatch reader makes of ``#SBATCH --time=TEXT`` (quoted: the tokenizer keeps it)."""
    quoted = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    try:
        r = parse_sbatch(f"#!/bin/bash\n#SBATCH --time={quoted}\nsrun true\n", file="t.sbatch")
    except InputError as err:
        assert (err.file, err.line, err.field) == ("t.sbatch", 2, "--time"), err
        return "NO_VAL"
    return "INFINITE" if r.time_limit_min is None else r.time_limit_min


@pytest.mark.parametrize("case", params("slurm-parse-time"))
def test_slurm_time(case):
    if case.case.startswith("--time") or case.path.endswith("slurm_opt.c"):
        judge(case, _sbatch_minutes(case.input))
    else:
        judge(case, _secs(case.input))

"""How far the readers agree with the corpus's hand-derived EXPECTED.tsv files.

Run ``python tests/corpus_agreement.py`` for the figures and every disagreement; the tests in
``test_io_sbatch.py`` / ``test_io_manifests.py`` import :func:`sbatch_agreement` and
:func:`k8s_agreement`. EXPECTED cells are prose ("unspecified (default 1)", "8 (if 1 node)");
each is normalised below by a rule that is written out, never by looking at our answer.
"""
from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"

sys.path.insert(0, str(ROOT / "src"))

from courselib.io.manifests import read_manifests  # noqa: E402
from courselib.io.sbatch import read_sbatch  # noqa: E402
from courselib.units import parse_memory  # noqa: E402


def _rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _lead_int(cell: str) -> int | None:
    m = re.match(r"\s*(\d+)", cell)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------------------------
# sbatch

SBATCH_FIELDS = ("nodes", "gpus_per_node", "total_gpus", "constraint", "exclusive",
                 "time_limit_min", "partition", "job_array", "het_components", "sbatch_accepts")


def _sbatch_compare(field: str, cell: str, r) -> tuple[bool, str]:
    """(agree?, our value as text) for one EXPECTED cell."""
    cell = cell.strip()
    if field == "nodes":
        ours = r.nodes
        want = None if cell.startswith("unspecified") else _lead_int(cell)
        return ours == want, str(ours)
    if field == "gpus_per_node":
        return r.gpus_per_node == _lead_int(cell), str(r.gpus_per_node)
    if field == "total_gpus":
        ours = r.total_gpus
        if "(if " in cell:       # "8 (if 1 node)": unknown from the script, default would give 8
            n = _lead_int(cell)
            reason = r.total_gpus_reason or ""
            return ours is None and f"would give {n}" in reason, f"{ours} ({reason})"
        if " x N" in cell:       # "8 x N (N not in script)": unknown, per-node count known
            reason = r.total_gpus_reason or ""
            return ours is None and f"{_lead_int(cell)} GPUs x N" in reason, f"{ours} ({reason})"
        return ours == _lead_int(cell), str(ours)
    if field == "constraint":
        return (r.constraint or "") == cell, str(r.constraint)
    if field == "exclusive":
        return r.exclusive == (cell == "yes"), str(r.exclusive)
    if field == "time_limit_min":
        want = _lead_int(cell) if cell else None
        return r.time_limit_min == want, str(r.time_limit_min)
    if field == "partition":
        return (r.partition or "") == cell, str(r.partition)
    if field == "job_array":
        if cell == "no":
            return r.array is None, str(r.array)
        if r.array is None:
            return False, "None"
        m = re.search(r"(\d+) tasks, max (\d+) running", cell)
        ok = True if not m else (r.array.tasks == int(m.group(1))
                                 and r.array.max_running == int(m.group(2)))
        return ok, f"{r.array.text}: {r.array.tasks} tasks, max {r.array.max_running}"
    if field == "het_components":
        return len(r.components) == _lead_int(cell), str(len(r.components))
    if field == "sbatch_accepts":
        # "yes..." = plain sbatch accepts the file; "NO..." / "only where a site plugin..." = not
        want = cell.lower().startswith("yes")
        ours = r.has_shebang and not r.unknown_options and not r.problems
        return ours == want, str(ours)
    raise KeyError(field)


def sbatch_agreement(corpus: Path = CORPUS):
    """(matched, total, disagreements[(file, field, expected, ours)], per-file results)."""
    rows = _rows(corpus / "sbatch" / "EXPECTED.tsv")
    matched = total = 0
    bad = []
    for row in rows:
        r = read_sbatch(corpus / "sbatch" / row["local_file"], strict=False)
        for fld in SBATCH_FIELDS:
            cell = row["sbatch_accepts_as_is"] if fld == "sbatch_accepts" else row[fld]
            ok, ours = _sbatch_compare(fld, cell, r)
            total += 1
            matched += ok
            if not ok:
                bad.append((row["local_file"], fld, cell, ours))
    return matched, total, bad


# --------------------------------------------------------------------------------------------
# Kubernetes

K8S_FIELDS = ("kind", "apiVersion", "name", "gang_size", "gang_rule", "gpus_per_pod",
              "total_gpus", "memory_limit_per_pod", "queue")


def _rule_key(text: str | None) -> str:
    t = (text or "").lower()
    for key in ("minavailable", "minmember", "parallelism", "sum of replicas"):
        if key in t:
            if key == "parallelism" and "unset" in t:
                return "parallelism-default"
            return key
    if "not a gang" in t or "not a workload" in t:
        return "none"
    return t


def _kv(cell: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in cell.split(";"))


def _k8s_compare(field: str, cell: str, r) -> tuple[bool, str]:
    cell = cell.strip()
    if field == "kind":
        return r.kind == cell, str(r.kind)
    if field == "apiVersion":
        return r.api_version == cell, str(r.api_version)
    if field == "name":
        m = re.fullmatch(r"\(generateName: (.*)\)", cell)
        want = m.group(1) + "*" if m else cell
        return r.name == want, str(r.name)
    if field == "gang_size":
        want = None if cell.startswith("n/a") else _lead_int(cell)
        return r.gang_size == want, str(r.gang_size)
    if field == "gang_rule":
        ok = _rule_key(r.gang_rule) == _rule_key(cell)
        if ok and cell.startswith("sum of replicas"):
            ok = r.gang_rule == cell
        return ok, r.gang_rule
    if field == "gpus_per_pod":
        ours = r.gpus_per_pod
        if cell.startswith("n/a"):
            return ours is None, str(ours)
        if "=" in cell:
            want = {k: int(v) for k, v in _kv(cell).items()}
            if isinstance(ours, int) and len(want) == 1:
                return ours == next(iter(want.values())), str(ours)
            return ours == want, str(ours)
        return ours == _lead_int(cell), str(ours)
    if field == "total_gpus":
        want = None if cell.startswith("n/a") else _lead_int(cell)
        return r.total_gpus == want, str(r.total_gpus)
    if field == "memory_limit_per_pod":
        def b(v):
            return None if v is None or v.startswith("none") else parse_memory(v)
        ours = r.memory_limit
        if "=" in cell and ";" in cell:
            want = {k: b(v) for k, v in _kv(cell).items()}
            got = {k: (None if v is None else parse_memory(v)) for k, v in (ours or {}).items()}
            return got == want, str(ours)
        got = None if ours is None or isinstance(ours, dict) and all(v is None for v in ours.values()) \
            else ours
        want = b(cell)
        if isinstance(got, str):
            got = parse_memory(got)
        return got == want, str(ours)
    if field == "queue":
        want = None if cell.startswith("(") else cell.split(" (")[0]
        return r.queue == want, str(r.queue)
    raise KeyError(field)


def k8s_agreement(corpus: Path = CORPUS):
    rows = _rows(corpus / "k8s" / "EXPECTED.tsv")
    cache: dict[str, list] = {}
    matched = total = 0
    bad = []
    for row in rows:
        f = row["local_file"]
        if f not in cache:
            cache[f] = read_manifests(corpus / "k8s" / f)
        docs = {r.doc_index: r for r in cache[f]}
        r = docs.get(int(row["doc_index"]))
        for fld in K8S_FIELDS:
            total += 1
            if r is None:
                bad.append((f, fld, row[fld], "no such document"))
                continue
            ok, ours = _k8s_compare(fld, row[fld], r)
            matched += ok
            if not ok:
                bad.append((f"{f}#{row['doc_index']}", fld, row[fld], ours))
    return matched, total, bad


def report(label: str, fn, corpus: Path = CORPUS) -> tuple[int, int, list]:
    """Run one agreement check and print its figure and every disagreement (shown under -s)."""
    matched, total, bad = fn(corpus)
    print(f"\n{label} agreement with EXPECTED.tsv: {matched}/{total} fields")
    for b in bad:
        print("  disagreement:", b)
    return matched, total, bad


def main() -> int:
    if not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS}")
        return 2
    for label, fn in (("sbatch", sbatch_agreement), ("k8s", k8s_agreement)):
        m, t, bad = fn()
        print(f"{label}: {m}/{t} fields agree with EXPECTED.tsv ({100 * m / t:.1f}%)")
        for f, fld, want, ours in bad:
            print(f"  {f}: {fld}: EXPECTED {want!r}, ours {ours!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

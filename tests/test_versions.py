"""The versions of the real systems: one table (courselib/data/versions.toml), and everything that names
a version of Kubernetes, etcd, Kueue or JobSet agrees with it — the Go modules the build pins
(k8s/*/go.mod), the constants the live code and the model use, and every recorded run the book shows
(issue 30). Slurm's row and its recordings are held by the Slurm suite (tests/test_slurm_*).
"""
from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import pytest

from courselib import versions
from courselib.versions import pinned

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "src" / "courselib" / "data" / "recorded"

#: The systems the course builds from Go modules, and how a recording names each.
BUILT = {"kubernetes": "Kubernetes", "etcd": "etcd", "kueue": "Kueue", "jobset": "JobSet"}


def test_every_row_has_a_version_a_date_and_where_its_defaults_were_read():
    rows = versions.all_versions()
    assert {"kubernetes", "etcd", "kueue", "jobset", "volcano", "kai"} <= {r.key for r in rows}
    for r in rows:
        assert r.version and r.system and r.defaults_read, r.key
        date.fromisoformat(r.date)  # a real date, ISO
    assert "|" in versions.table() and all(r.version in versions.table() for r in rows)


@pytest.mark.parametrize("key", sorted(BUILT))
def test_the_build_pins_the_version_of_the_table(key):
    row = pinned(key)
    mod = (REPO / row.get("gomod")).read_text()
    found = re.findall(rf"^\s*(?:require\s+)?{re.escape(row.get('module'))} (v\S+)", mod, re.M)
    assert found == [row.version], f"{row.get('gomod')} pins {found}, versions.toml says {row.version}"


def test_the_live_code_and_the_model_use_the_pinned_versions():
    from courselib.live.kube import config
    from courselib.live.kube.jobset import manager as jobset
    from courselib.live.kube.kueue import manager as kueue
    from courselib.model import qos
    from courselib.model.policies.kueue import pinned_version
    assert config.KUBERNETES_VERSION == pinned("kubernetes").version == "v" + qos.KUBERNETES_VERSION
    assert config.ETCD_VERSION == pinned("etcd").version
    assert kueue.KUEUE_VERSION == pinned("kueue").version == pinned_version()
    assert jobset.JOBSET_VERSION == pinned("jobset").version


def _named_versions(data) -> list[tuple[str, str, str]]:
    """(system, version, where) for every version a recording states: its ``recorded_on`` line
    ("..., Kubernetes v1.37.2, etcd v3.7.3, Kueue v0.17.1"), every ``versions`` map and a replay's
    ``extra`` (``{"kueue": "v0.17.1"}``), at any depth."""
    out = []

    def walk(x, where):
        if isinstance(x, dict):
            for k, v in x.items():
                here = f"{where}.{k}"
                if k == "recorded_on" and isinstance(v, str):
                    for key, name in BUILT.items():
                        out.extend((key, m, here) for m in re.findall(rf"\b{name} (v[\w.+-]+)", v))
                elif k == "versions" and isinstance(v, dict):
                    out.extend((s, str(ver), here) for s, ver in v.items() if s in BUILT)
                elif k in BUILT and isinstance(v, str) and re.fullmatch(r"v\d+\.\d+\.\d+\S*", v):
                    out.append((k, v, here))
                elif k == "version" and isinstance(v, str) and re.fullmatch(r"v1\.\d+\.\d+", v):
                    out.append(("kubernetes", v, here))   # kube-feature-gates.json
                walk(v, here)
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{where}[{i}]")
    walk(data, "")
    return out


RECORDINGS = sorted(RECORDED.glob("*.json"))


@pytest.mark.parametrize("path", RECORDINGS, ids=[p.name for p in RECORDINGS])
def test_every_recorded_run_names_the_pinned_versions(path):
    stated = _named_versions(json.loads(path.read_text()))
    wrong = [f"{where}: {BUILT[key]} {v}, the build pins {pinned(key).version}"
             for key, v, where in stated if v != pinned(key).version]
    assert not wrong, f"{path.name} was recorded on another version: re-record it\n" + "\n".join(wrong)


def test_the_recordings_of_real_kubernetes_runs_all_name_a_version():
    """The check above is not empty: each kube/Kueue/JobSet recording states its versions."""
    for path in RECORDINGS:
        if path.name.startswith("kube-"):
            assert _named_versions(json.loads(path.read_text())), path.name


def test_a_recording_of_another_version_is_caught(tmp_path):
    old = {"recorded_on": "Linux, Kubernetes v1.36.3, etcd v3.7.3, Kueue v0.17.0",
           "replay": {"versions": {"kubernetes": "v1.36.3"}, "extra": {"kueue": "v0.17.0"}}}
    bad = [(k, v) for k, v, _ in _named_versions(old) if v != pinned(k).version]
    assert sorted(set(bad)) == [("kubernetes", "v1.36.3"), ("kueue", "v0.17.0")]

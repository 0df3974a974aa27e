"""`courselib classroom` without a real system (issue 33): the Indexed Job that grades a class on
Kubernetes (its shape, its Kueue label, each index's shell step picking its own submission, bad input as
one line) and the class server's pieces that need no daemon (the nbgitpuller link, the hub's
configuration, its record). The real hub is tests/test_hub_live.py; the Job on the real control plane
with the real Kueue is tests/test_classroom_kueue_live.py."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
import yaml

from courselib.errors import CourseError, InputError
from courselib.grading import kubejob
from courselib.live import hub

ROOT = Path(__file__).resolve().parents[1]
LAB = "08-gang-cost"


def _class(tmp_path: Path, students=("alice", "bob", "carol")) -> Path:
    folder = tmp_path / "submissions"
    for i, s in enumerate(students):
        path = folder / f"{s}.ipynb" if i == 0 else folder / s / "labs" / f"{LAB}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "labs" / f"{LAB}.ipynb", path)
    return folder


def test_the_indexed_job_grades_one_submission_per_index_in_a_kueue_queue(tmp_path):
    folder = _class(tmp_path)
    cm, job = kubejob.manifests(folder, queue="grading", name="lab8", lab=LAB, parallelism=2)
    assert job["metadata"]["labels"][kubejob.QUEUE_LABEL] == "grading"
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["suspend"]) == ("Indexed", 3, 2, True)
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    c = pod["containers"][0]
    assert c["resources"]["requests"] == c["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert {"name": "COURSELIB_GRADE_ISOLATION", "value": "container"} in c["env"]
    assert [m["readOnly"] for m in c["volumeMounts"] if m["mountPath"].endswith("submissions")] == [True]
    lines = cm["data"]["submissions.tsv"].splitlines()
    assert lines == [f"alice.ipynb\talice--{LAB}.json\t", f"bob/labs/{LAB}.ipynb\tbob--{LAB}.json\t",
                     f"carol/labs/{LAB}.ipynb\tcarol--{LAB}.json\t"]
    # one YAML stream, read back the same
    assert list(yaml.safe_load_all(kubejob.dump([cm, job]))) == [cm, job]


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_each_index_runs_the_grader_on_its_own_submission(tmp_path):
    """The pod's shell step, run here with a stand-in `courselib` that prints its arguments."""
    folder = _class(tmp_path)
    roster = tmp_path / "roster.csv"
    roster.write_text("student,seed\nbob,17\n")
    cm, job = kubejob.manifests(folder, queue="grading", lab=LAB, roster=roster)
    listing = tmp_path / "list"
    listing.mkdir()
    (listing / "submissions.tsv").write_text(cm["data"]["submissions.tsv"])
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "courselib").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (bin_ / "courselib").chmod(0o755)
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    script = script.replace(kubejob.LIST_DIR, str(listing)).replace(kubejob.MOUNT, str(tmp_path / "class"))
    out = {}
    for index in range(3):
        r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True,
                           env={"PATH": f"{bin_}:{os.environ['PATH']}", "JOB_COMPLETION_INDEX": str(index)})
        out[index] = r.stdout.splitlines()
    assert out[0][1:3] == ["grade", f"{tmp_path}/class/submissions/alice.ipynb"]
    assert out[1][1:3] == ["grade", f"{tmp_path}/class/submissions/bob/labs/{LAB}.ipynb"]
    assert out[1][-2:] == ["--seed", "17"] and "--seed" not in out[2]
    assert out[2][out[2].index("--json-file") + 1] == f"{tmp_path}/class/reports/carol--{LAB}.json"


def test_bad_input_is_one_line_naming_the_field(tmp_path):
    folder = _class(tmp_path)
    with pytest.raises(InputError, match="--queue"):
        kubejob.manifests(folder, queue="Grading_Queue", lab=LAB)
    with pytest.raises(InputError, match="--memory"):
        kubejob.manifests(folder, queue="q", lab=LAB, memory="2 GB")
    (folder / "dave's lab").mkdir()
    shutil.copy(ROOT / "labs" / f"{LAB}.ipynb", folder / "dave's lab" / f"{LAB}.ipynb")
    with pytest.raises(InputError, match="characters"):
        kubejob.manifests(folder, queue="q", lab=LAB)
    shutil.rmtree(folder / "dave's lab")
    (folder / "eve").symlink_to(folder / "bob")
    with pytest.raises(InputError, match="symbolic link"):
        kubejob.manifests(folder, queue="q", lab=LAB)
    with pytest.raises(InputError, match="no such folder"):
        kubejob.manifests(tmp_path / "nowhere", queue="q", lab=LAB)


def test_the_cli_writes_the_job(tmp_path):
    folder = _class(tmp_path)
    out = tmp_path / "job.yaml"
    r = subprocess.run([sys.executable, "-m", "courselib", "classroom", "k8s-job", str(folder), "--queue", "grading",
                        "--lab", LAB, "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "Indexed Job grade (3 submissions, 3 at a time) for Kueue queue grading" in r.stdout
    assert [d["kind"] for d in yaml.safe_load_all(out.read_text())] == ["ConfigMap", "Job"]
    r = subprocess.run([sys.executable, "-m", "courselib", "classroom", "k8s-job", str(tmp_path / "none"),
                        "--queue", "q", "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_the_pull_link_opens_the_lab_after_pulling_the_course():
    link = hub.pull_link("http://127.0.0.1:18800/", "file:///srv/course", branch="main", lab=LAB)
    url = urllib.parse.urlsplit(link)
    assert url.path == "/hub/user-redirect/git-pull"
    q = dict(urllib.parse.parse_qsl(url.query))
    assert q == {"repo": "file:///srv/course", "branch": "main", "targetpath": "course",
                 "urlpath": f"lab/tree/course/labs/{LAB}.ipynb"}


def test_the_hub_configuration_stays_on_loopback_in_its_folder(tmp_path):
    h = hub.Hub(18800, tmp_path, "file:///srv/course", token="t" * 32)
    text = hub.render_config(h)
    compile(text, "jupyterhub_config.py", "exec")
    for line in ("c.JupyterHub.ip = '127.0.0.1'", "c.JupyterHub.port = 18800", "c.JupyterHub.hub_port = 18802",
                 "c.ConfigurableHTTPProxy.should_start = False", "c.JupyterHub.spawner_class = 'simple'",
                 "c.JupyterHub.authenticator_class = 'shared-password'"):
        assert line in text
    assert str(tmp_path / "jupyterhub.sqlite") in text and str(tmp_path / "home" / "{username}") in text
    assert "expose_app_in_browser" not in text and "expose_app_in_browser" in hub.render_config(h, expose_app=True)
    assert hub.MARKER in text and "t" * 32 in text   # every notebook server and kernel carries the mark


def test_a_hub_record_round_trips_and_a_bad_one_is_refused(tmp_path):
    h = hub.Hub(18800, tmp_path, "file:///srv/course", token="t" * 32)
    assert hub.Hub.from_json(h.to_json()).to_json() == h.to_json()
    for bad in ({"port": 80}, {"state_dir": "relative"}, {"token": ""}, {"procs": {}}):
        with pytest.raises((ValueError, TypeError, KeyError)):
            hub.Hub.from_json({**h.to_json(), **bad})


def test_the_course_must_be_a_git_repository(tmp_path):
    with pytest.raises(InputError, match="not a git repository"):
        hub.course_url(str(tmp_path))
    assert hub.course_url("https://github.com/example/course") == "https://github.com/example/course"


def test_up_refuses_a_port_below_1024_and_down_with_nothing_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv(hub.STATE_ENV, str(tmp_path / "state" / "hub.json"))
    (tmp_path / "state").mkdir(mode=0o700)
    assert hub.down() == {"stopped": [], "left": []}
    if hub.unavailable_reason():
        with pytest.raises(CourseError, match="no class server can start here"):
            hub.up(course=str(ROOT), port=80)
    else:
        with pytest.raises(InputError, match="--port"):
            hub.up(course=str(ROOT), port=80)


@pytest.mark.skipif(hub.kubespawner_reason() is not None, reason=str(hub.kubespawner_reason()))
def test_kubespawner_makes_the_students_pod_with_the_pages_settings(tmp_path):
    """KubeSpawner's own get_pod_manifest, with no cluster contacted (its validation by the real API server is
    tests/test_classroom_kueue_live.py)."""
    pod = hub.kubespawner_pod("alice", image="registry.example.edu/all-or-nothing:2026-12", namespace="class")
    assert (pod["apiVersion"], pod["kind"], pod["metadata"]["name"], pod["metadata"]["namespace"]) == \
        ("v1", "Pod", "jupyter-alice", "class")
    c = pod["spec"]["containers"][0]
    assert c["image"] == "registry.example.edu/all-or-nothing:2026-12"
    assert c["resources"] == {"limits": {"cpu": 2.0, "memory": 2 * 1024 ** 3},
                              "requests": {"cpu": 0.5, "memory": 1024 ** 3}}
    assert pod["spec"]["volumes"] == [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}]
    assert pod["spec"]["automountServiceAccountToken"] is False
    with pytest.raises(InputError, match="STUDENT"):
        hub.kubespawner_pod("al ice", image="x")
    out = tmp_path / "pod.yaml"
    r = subprocess.run([sys.executable, "-m", "courselib", "classroom", "hub", "pod", "bob", "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "Unclosed" not in r.stderr, r.stderr
    assert yaml.safe_load(out.read_text())["metadata"]["labels"]["hub.jupyter.org/username"] == "bob"

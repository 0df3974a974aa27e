"""The command line: one-line errors, JSON output, help for every family."""
from __future__ import annotations

import json
import subprocess
import sys

from courselib.cli.main import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "courselib", *args], capture_output=True, text=True)


def test_help_lists_live():
    out = run("--help")
    assert out.returncode == 0 and "live" in out.stdout


def test_live_show_json(capsys):
    assert main(["live", "show", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["pid"] > 0 and "pid" in d["namespaces"]


def test_record_refuses_to_overwrite(tmp_path):
    target = tmp_path / "run.json"
    target.write_text("precious")
    out = run("live", "unshare", "--record", str(target))
    if "not permitted" in out.stderr or "not installed" in out.stderr:
        assert out.returncode == 2 and out.stderr.count("\n") == 1
    else:
        assert out.returncode == 2 and "not overwritten" in out.stderr
    assert target.read_text() == "precious"
    assert "Traceback" not in out.stderr

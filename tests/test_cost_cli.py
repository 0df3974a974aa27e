"""The `courselib cost` and `courselib checkpoint` commands: the numbers the issue asks for."""
from __future__ import annotations

import json

import pytest

from courselib.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_seed_numbers_from_the_cli(capsys):
    doc = run_json(capsys, "cost", "--gpus", "400", "--wait", "25m", "--price", "2-4")
    assert doc["wasted_gpu_hours"] == 166.67
    assert doc["cost_usd"] == [333.33, 666.67]
    assert doc["with_gang_admission"]["wasted_gpu_hours"] == 0.0
    assert doc["saving_usd"] == [333.33, 666.67]


def test_units_give_the_same_answer(capsys):
    a = run_json(capsys, "cost", "--gpus", "400", "--wait", "25m", "--price", "3")
    b = run_json(capsys, "cost", "--gpus", "400", "--wait", "1500s", "--price", "3")
    c = run_json(capsys, "cost", "--gpus", "400", "--wait", "0.417h", "--price", "3")
    assert a["wasted_gpu_hours"] == b["wasted_gpu_hours"] == 166.67
    assert c["wasted_gpu_hours"] == 166.8       # 0.417 h is a rounded 25 min
    assert a["cost_usd"] == 500.0               # a single price gives a number, not a list


def test_exercise_from_the_cli_and_the_preset(capsys):
    doc = run_json(capsys, "cost", "--gpus", "480", "--wait", "40m", "--price", "3", "--gang-size", "512")
    assert doc["wasted_gpu_hours"] == 320.0 and doc["cost_usd"] == 960.0 and doc["missing"] == 32
    assert doc["with_gang_admission"]["cost_usd"] == 0.0
    preset = run_json(capsys, "cost", "--preset", "exercise")
    assert preset == doc


def test_text_output_echoes_its_arguments(capsys):
    code, out, _ = run(capsys, "cost", "--gpus", "400", "--wait", "25m", "--price", "2-4", "--gang-size", "512")
    assert code == 0
    assert out.splitlines()[0] == "ARG gpus 400"
    assert "112 missing" in out and "166.67 GPU-hours" in out and "$333.33–$666.67" in out


@pytest.mark.parametrize("argv,needle", [
    (["cost", "--gpus", "-400", "--wait", "25m"], "gpus"),
    (["cost", "--gpus", "400", "--wait", "25m", "--price", "4-2"], "backwards"),
    (["cost", "--gpus", "400", "--wait", "25 minutes"], "--wait"),
    (["cost", "--gpus", "400", "--wait", "25y"], "--wait"),
    (["cost", "--gpus", "400"], "--wait"),
    (["checkpoint", "--cost", "60s", "--mtbf", "0s"], "mtbf"),
    (["checkpoint", "--cost", "1 fortnight", "--mtbf", "2h"], "--cost"),
    (["checkpoint", "--cost", "60s", "--mtbf", "2h", "--price", "3"], "--gpus"),
])
def test_bad_inputs_are_one_line_errors(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("courselib: ") and needle in err
    assert "Traceback" not in err


def test_checkpoint_command(capsys):
    doc = run_json(capsys, "checkpoint", "--cost", "60s", "--mtbf", "2h")
    assert doc["young_s"] == 929.52
    assert doc["daly_s"] == 889.95
    assert doc["daly_s"] <= doc["mtbf_s"]
    assert 0 <= doc["waste_fraction"] <= 1
    assert doc["waste_fraction"] == round(60 / 889.9457 + 889.9457 / 14400, 4)


def test_checkpoint_daly_cross_check_from_the_cli(capsys):
    doc = run_json(capsys, "checkpoint", "--cost", "5m", "--mtbf", "24h")
    assert round(doc["daly_s"] / 60, 2) == 116.69


def test_checkpoint_failure_cost(capsys):
    doc = run_json(capsys, "checkpoint", "--cost", "60s", "--mtbf", "12h", "--restart", "5m",
                   "--gpus", "512", "--interval", "1h", "--timeout", "10m", "--price", "2-4")
    f = doc["failure"]
    assert f["expected_lost_s_per_failure"] == 1800 + 600 + 300
    assert f["expected_gpu_hours_per_failure"] == 384.0
    assert f["failures_per_day"] == 2.0
    assert f["expected_gpu_hours_per_day"] == 768.0
    assert f["cost_usd_per_day"] == [1536.0, 3072.0]

"""Shared parsing: durations, memory sizes, located YAML errors."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from courselib.errors import CourseError, InputError
from courselib.io.yamlfile import Fields, load_all_text
from courselib.units import PAGE_SIZE, format_duration, parse_duration, parse_memory
from budget import examples


@pytest.mark.parametrize("text,seconds", [("25m", 1500), ("1500s", 1500), ("0.5h", 1800), ("1d", 86400),
                                          (90, 90), ("2h", 7200), ("30", 30)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


def test_bare_number_unit_is_the_callers_choice():
    assert parse_duration(15, bare="m") == 900


@pytest.mark.parametrize("bad", ["25 minutes", "-5m", "m", True, None, "1h30m"])
def test_bad_durations_are_one_line_errors(bad):
    with pytest.raises(InputError) as e:
        parse_duration(bad, field="wait")
    assert "wait" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text,nbytes", [("1Gi", 2**30), ("512Mi", 512 * 2**20), ("2G", 2 * 10**9),
                                         ("150000p", 150000 * PAGE_SIZE), (4096, 4096), ("64Ki", 65536)])
def test_parse_memory(text, nbytes):
    assert parse_memory(text) == nbytes


@pytest.mark.parametrize("bad", ["1 GB of RAM", "12m", "-1Gi", "Gi", [1]])
def test_bad_memory(bad):
    with pytest.raises(InputError):
        parse_memory(bad)


@settings(max_examples=examples(200), deadline=None)
@given(st.floats(min_value=0, max_value=1e7, allow_nan=False), st.sampled_from("smhd"))
def test_duration_round_trip(x, unit):
    factor = {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    assert parse_duration(f"{x!r}{unit}") == pytest.approx(x * factor)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=12))
def test_any_text_is_a_duration_or_a_located_error(text):
    try:
        assert parse_duration(text) >= 0
    except CourseError as err:
        assert "\n" not in str(err)


def test_format_duration():
    assert format_duration(1500) == "25m"
    assert format_duration(5400) == "1h30m"
    assert format_duration(42.5) == "42.5s"


def test_yaml_keeps_lines_and_reports_bad_yaml_with_line():
    docs = load_all_text("a: 1\nb:\n  - x: 2\n  - y: 3\n", file="w.yaml")
    assert docs[0].line_of("b") == 2
    assert docs[0]["b"].line_of(1) == 4
    with pytest.raises(InputError) as e:
        load_all_text("a: 1\n  b: [\n", file="w.yaml")
    assert str(e.value).startswith("w.yaml:")


def test_fields_report_file_line_field_and_fix():
    doc = load_all_text("jobs:\n  - {name: a, pods: many}\n", file="w.yaml")[0]
    f = Fields(doc["jobs"][0], file="w.yaml", where="jobs[0]")
    with pytest.raises(InputError) as e:
        f.req("pods", int)
    assert str(e.value) == "w.yaml:2: jobs[0].pods: expected a whole number, got 'many'"
    with pytest.raises(InputError) as e:
        f.unknown({"name", "pod"})
    assert "did you mean 'pod'" in str(e.value)

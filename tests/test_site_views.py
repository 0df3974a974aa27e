"""The tables behind the website's kernel-free views hold exactly what courselib computes.

(The browser tests in test_site.py then check that the page shows these numbers when a control moves.)
"""
from __future__ import annotations

import functools

from hypothesis import given, settings
from hypothesis import strategies as st

from courselib.model import cost
from courselib.sim.gang import simulate
from courselib.static import views
from courselib.widgets.gang import default_workload
from budget import examples


@functools.lru_cache(maxsize=None)
def cost_table():
    return views.cost_table()


@functools.lru_cache(maxsize=None)
def race_table():
    return views.gang_race_table()


def test_the_course_cases_are_settings_of_the_calculator():
    t = cost_table()
    for case in cost.PRESETS.values():
        assert case.gpus_held in t["gpus"] and case.wait_s / 60 in t["wait_min"]
        price = f"{case.price.low:g}-{case.price.high:g}" if case.price.is_range else f"{case.price.low:g}"
        assert price in t["prices"]
    d = t["default"]
    assert (d["gpus"], d["wait_min"], d["price"]) == (cost.SEED.gpus_held, cost.SEED.wait_s / 60, "2-4")


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_every_cell_of_the_calculator_is_courselibs_number(data):
    t = cost_table()
    i = data.draw(st.integers(0, len(t["gpus"]) - 1))
    j = data.draw(st.integers(0, len(t["wait_min"]) - 1))
    k = data.draw(st.integers(0, len(t["prices"]) - 1))
    c = cost.gang_wait_cost(cost.GangWait(gpus_held=t["gpus"][i], wait_s=t["wait_min"][j] * 60.0,
                                          price=cost.Price.parse(t["prices"][k])))
    rounded = (lambda v: [round(x, 2) for x in v]) if isinstance(c.cost_usd, list) else (lambda v: round(v, 2))
    assert t["gpu_hours"][i][j] == round(c.wasted_gpu_hours, 2)
    assert t["cost"][i][j][k] == rounded(c.cost_usd)
    assert t["gang_gpu_hours"][i][j] == round(c.gang_wasted_gpu_hours, 2) == 0
    assert t["gang_cost"][i][j][k] == rounded(c.gang_cost_usd)


def test_the_race_holds_the_seeds_deadlock_and_every_setting():
    t = race_table()
    assert len(t["cases"]) == len(t["policies"]) * len(t["nodes"]) * len(t["delay_min"])
    d = t["default"]
    seed = t["cases"][f"{d['policy']}|{d['nodes']}|{d['delay_min']}"]
    assert d["nodes"] * t["gpus_per_node"] == 600 and seed["deadlock"]
    assert [j["held_max"] for j in seed["jobs"]] == [300, 300]
    for policy in ("volcano", "kueue", "slurm"):
        assert not t["cases"][f"{policy}|75|0"]["deadlock"], policy


@settings(max_examples=examples(8), deadline=None)
@given(st.data())
def test_every_race_setting_is_courselibs_simulation(data):
    t = race_table()
    p = data.draw(st.sampled_from(t["policies"]))
    n = data.draw(st.sampled_from(t["nodes"]))
    m = data.draw(st.sampled_from(t["delay_min"]))
    r = simulate(default_workload(nodes=n, gpus_per_node=t["gpus_per_node"], minutes_b=m), p, horizon=t["horizon"])
    case = t["cases"][f"{p}|{n}|{m}"]
    assert (case["verdict"], case["deadlock"], case["wasted_gpu_hours"]) == \
        (r.verdict, r.deadlock, round(r.wasted_gpu_hours, 2))
    # the drawing's cluster panel adds up to the cluster at every step
    u = case["usage"]
    assert all(a + b + c == n * t["gpus_per_node"] for a, b, c in zip(u["training"], u["idle"], u["free"]))


def test_tables_are_deterministic():
    assert views.cost_table() == cost_table()
    assert views.race_case("kube-default", 75, 10) == race_table()["cases"]["kube-default|75|10"]

"""Read an OOM ``SCENARIO.yaml`` into a :class:`courselib.model.memcg.OomScenario`.

```yaml
scope: memcg            # or: node (global OOM)
limit: 1Gi              # memory.max for memcg; RAM for node. Ki/Mi/Gi, or pages with a 'p' suffix
swap: 0
oom_group: false        # cgroup v2 memory.oom.group
cgroup: v2              # or v1
processes:
  - {name: a, rss: 150000p, pagetables: 0, swap: 0, oom_score_adj: 0}
```

Optional: ``node_memory`` (default 16Gi) and ``node_swap`` for ``/proc/PID/oom_score``;
``high`` (``memory.high``); ``usage`` (charge at t=0); ``duration``/``step`` of the timeline;
``restart`` (Never/Always/OnFailure); ``cgroups`` (child cgroups: ``path``, ``max``, ``high``,
``oom_group``); per process ``cgroup``, ``grow`` (per second), ``grow_by``, ``start``,
``unkillable``. Every mistake is one located line: file, line, field, and what to do.
"""
from __future__ import annotations

from courselib.errors import InputError
from courselib.io.policy import MODEL_LIMITS, check_count
from courselib.io.yamlfile import Fields, load_all_text, load_one
from courselib.model.badness import OOM_SCORE_ADJ_MAX, OOM_SCORE_ADJ_MIN, Task
from courselib.model.memcg import Cgroup, OomScenario, ProcessSpec
from courselib.units import PAGE_SIZE, format_duration, parse_duration, parse_memory

TOP = {"scope", "limit", "swap", "oom_group", "cgroup", "processes", "node_memory", "node_swap",
       "high", "usage", "duration", "step", "restart", "cgroups", "name", "description"}
PROC = {"name", "rss", "pagetables", "swap", "oom_score_adj", "cgroup", "grow", "grow_by",
        "start", "unkillable"}
CGROUP = {"path", "max", "high", "oom_group"}


def _memory(value, *, field: str) -> int:
    """Bytes; a bare number other than 0 is refused: bytes or pages is exactly the mistake to catch."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0:
        raise InputError(f"{value!r} has no unit", field=field,
                         hint=f"write {value}p for pages or a size such as 600Mi")
    return parse_memory(value, field=field)


def _pages(value, *, field: str) -> int:
    return _memory(value, field=field) // PAGE_SIZE


def _rate(value, *, field: str) -> int:
    """Bytes per second from ``4Mi`` or ``4Mi/s``."""
    if isinstance(value, str) and value.strip().endswith("/s"):
        value = value.strip()[:-2]
    return _memory(value, field=field)


def _cgroup_path(value, *, field: str) -> str:
    if not isinstance(value, str) or not value.startswith("/") or "//" in value or \
            (len(value) > 1 and value.endswith("/")):
        raise InputError(f"{value!r} is not a cgroup path", field=field,
                         hint="write '/' for the scenario's cgroup or '/child/grandchild' below it")
    return value


def _choice(f: Fields, key: str, allowed: tuple[str, ...], default: str) -> str:
    value = f.opt(key, str, default)
    if value not in allowed:
        raise f.error(key, f"{value!r} is not one of {', '.join(allowed)}")
    return value


def scenario_from_mapping(doc, *, file: str | None = None) -> OomScenario:
    """Validate one parsed YAML mapping (with line information) into an :class:`OomScenario`."""
    f = Fields(doc, file=file)
    f.unknown(TOP)
    scope = _choice(f, "scope", ("memcg", "node"), "memcg")
    cgroup = _choice(f, "cgroup", ("v2", "v1"), "v2")
    restart = _choice(f, "restart", ("Never", "Always", "OnFailure"), "Never")
    limit = f.req("limit", lambda v: _pages(v, field="limit"))
    if limit <= 0:
        raise f.error("limit", "the limit must be at least one page")
    swap = f.opt("swap", lambda v: _pages(v, field="swap"), 0)
    oom_group = f.opt("oom_group", bool, False)
    if oom_group and cgroup == "v1":
        raise f.error("oom_group", "memory.oom.group exists only on cgroup v2",
                      hint="set cgroup: v2, or oom_group: false")
    node_memory = f.opt("node_memory", lambda v: _pages(v, field="node_memory"), 4 * 1024 * 1024)
    if node_memory <= 0:
        raise f.error("node_memory", "node memory must be at least one page")
    node_swap = f.opt("node_swap", lambda v: _pages(v, field="node_swap"), 0)
    high = f.opt("high", lambda v: _pages(v, field="high"))
    if high is not None and scope == "node":
        raise f.error("high", "memory.high belongs to a cgroup", hint="use scope: memcg")
    usage = f.opt("usage", lambda v: _pages(v, field="usage"))
    duration = f.opt("duration", lambda v: parse_duration(v, field="duration"), 60.0)
    step = f.opt("step", lambda v: parse_duration(v, field="step"), 0.1)
    if step <= 0:
        raise f.error("step", "the time step must be positive")

    cgroups = []
    raw_cgroups = f.opt("cgroups", None, [])
    if not isinstance(raw_cgroups, list):
        raise f.error("cgroups", "expected a list of cgroups",
                      hint="add '- {path: /child, max: 256Mi, oom_group: true}'")
    for i, item in enumerate(raw_cgroups):
        cf = Fields(item, file=file, where=f"cgroups[{i}]")
        cf.unknown(CGROUP)
        path = cf.req("path", lambda v: _cgroup_path(v, field="path"))
        if cgroup == "v1" and cf.opt("oom_group", bool, False):
            raise cf.error("oom_group", "memory.oom.group exists only on cgroup v2")
        cgroups.append(Cgroup(path, cf.opt("max", lambda v: _pages(v, field="max")),
                              cf.opt("high", lambda v: _pages(v, field="high")),
                              cf.opt("oom_group", bool, False)))

    raw = f.req("processes")
    if not isinstance(raw, list) or not raw:
        raise f.error("processes", "expected a list of processes",
                      hint="add '- {name: a, rss: 150000p, oom_score_adj: 0}'")
    check_count("processes", len(raw), file=file, line=f.line("processes"), field="processes")
    check_count("processes", len(raw_cgroups), file=file, line=f.line("cgroups"), field="cgroups")
    # The timeline costs about 3 microseconds per process per step: bound the product.
    steps, lim = duration / step, MODEL_LIMITS["steps"]
    if steps * len(raw) > lim.value:
        key = "step" if f.has("step") else "duration"
        raise f.error(key, f"duration {format_duration(duration)} / step {step:g} s = {steps:,.0f} steps of "
                           f"{len(raw):,} process{'es' if len(raw) != 1 else ''}, more than courselib "
                           f"simulates ({lim.show(lim.value)})",
                      hint="take a longer step or a shorter duration, or " + lim.hint())
    procs, seen = [], {}
    for i, item in enumerate(raw):
        pf = Fields(item, file=file, where=f"processes[{i}]")
        pf.unknown(PROC)
        name = pf.req("name", str)
        if name in seen:
            raise pf.error("name", f"duplicate process name {name!r} (first on line {seen[name]})",
                           hint="give every process its own name")
        seen[name] = pf.line("name")
        adj = pf.opt("oom_score_adj", int, 0)
        if not OOM_SCORE_ADJ_MIN <= adj <= OOM_SCORE_ADJ_MAX:
            raise pf.error("oom_score_adj", f"{adj} is outside [-1000, 1000]",
                           hint="the kernel refuses such a value with EINVAL")
        task = Task(name, pf.req("rss", lambda v: _pages(v, field="rss")),
                    swap=pf.opt("swap", lambda v: _pages(v, field="swap"), 0),
                    pagetables=pf.opt("pagetables", lambda v: _memory(v, field="pagetables"), 0),
                    oom_score_adj=adj, unkillable=pf.opt("unkillable", bool, False))
        path = pf.opt("cgroup", lambda v: _cgroup_path(v, field="cgroup"), "/")
        if path != "/" and path not in {c.path for c in cgroups}:
            cgroups.append(Cgroup(path))
        grow = pf.opt("grow", lambda v: _rate(v, field="grow"), 0)
        grow_by = pf.opt("grow_by", lambda v: _memory(v, field="grow_by"))
        start = pf.opt("start", lambda v: parse_duration(v, field="start"), 0.0)
        procs.append(ProcessSpec(task, path, grow, grow_by, start))
    return OomScenario(scope=scope, limit=limit, processes=tuple(procs), swap=swap,
                       oom_group=oom_group, cgroup=cgroup, node_memory=node_memory,
                       node_swap=node_swap if scope == "memcg" else swap, high=high, usage=usage,
                       cgroups=tuple(cgroups), duration=duration, step=step, restart=restart)


def read_scenario(path) -> OomScenario:
    """The scenario in the YAML file at ``path``."""
    return scenario_from_mapping(load_one(path, "scenario"), file=str(path))


def scenario_from_text(text: str, *, file: str = "<scenario>") -> OomScenario:
    """The scenario in a YAML string (the playground and the tests use this)."""
    docs = [d for d in load_all_text(text, file=file) if d is not None]
    if len(docs) != 1:
        raise InputError(f"expected one YAML document, found {len(docs)}", file=file)
    return scenario_from_mapping(docs[0], file=file)

"""``courselib live``: look at your own process, and make a PID namespace of your own."""
from __future__ import annotations

import argparse
import platform
from pathlib import Path

from courselib.errors import InputError
from courselib.live.recorded import machine_note, write as write_recorded
from courselib.units import format_bytes


def register(sub) -> None:
    p = sub.add_parser("live", help="the real system: your process's namespaces and cgroup; unshare")
    lsub = p.add_subparsers(dest="live_command", metavar="SUBCOMMAND", required=True)

    show = lsub.add_parser("show", help="namespaces, PIDs, hostname and memory limit of this process")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.set_defaults(func=_show)

    un = lsub.add_parser("unshare", help="run a process in a new PID namespace (needs privilege)")
    un.add_argument("--json", action="store_true")
    un.add_argument("--record", metavar="FILE",
                    help="write the run as the course's recorded run (refuses to overwrite)")
    un.set_defaults(func=_unshare)

    ctr = lsub.add_parser("container", help="run CMD as PID 1 of a real container (runc; needs root)",
                          description="Run CMD as PID 1 of a real container from the course's own base image "
                                      "(a stand-in for nvidia/cuda) and report what it saw inside and what the "
                                      "host saw of it. Example: courselib live container --memory 32Mi -- "
                                      "dd if=/dev/zero of=/dev/null bs=64M count=1")
    ctr.add_argument("--memory", metavar="LIMIT", help="memory limit, as in a pod's limits.memory (e.g. 32Mi)")
    ctr.add_argument("--runtime", choices=("auto", "runc", "crun"), default="auto",
                     help="the OCI runtime (auto: runc, then crun; the output names the one that ran)")
    ctr.add_argument("--timeout", default="60s", help="stop the container after this long (default 60s)")
    ctr.add_argument("--json", action="store_true")
    ctr.add_argument("--record", metavar="FILE", help="write the run as a recorded run (refuses to overwrite)")
    ctr.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command and its arguments")
    ctr.set_defaults(func=_container)

    oom = lsub.add_parser("container-oom", help="chapter 3's real containers: PID 1 over its memory limit, "
                                                "then a child of PID 1 (needs root)")
    oom.add_argument("--json", action="store_true")
    oom.add_argument("--record", metavar="FILE", help="write the runs as a recorded run (refuses to overwrite)")
    oom.set_defaults(func=_container_oom)

    cpu = lsub.add_parser("cpu-throttle", help="a busy loop under a real CFS CPU limit beside an unlimited one (needs root)")
    cpu.add_argument("--cpu", default="250m", help="the CPU limit, as in a pod's limits.cpu (default 250m)")
    cpu.add_argument("--seconds", default="2s", help="how long to measure (default 2s)")
    cpu.add_argument("--json", action="store_true")
    cpu.add_argument("--record", metavar="FILE", help="write the run as a recorded run (refuses to overwrite)")
    cpu.set_defaults(func=_cpu_throttle)


def show_dict() -> dict:
    from courselib.live import proc

    view = proc.process_view()
    mem = proc.memory_limit()
    return {
        "pid": view.pid, "ppid": view.ppid, "nspid": list(view.nspid), "hostname": view.hostname,
        "in_initial_pid_namespace": view.in_initial_pid_namespace,
        "pid1_command": view.pid1_command,
        "cgroup_mode": proc.cgroup_mode(),
        "namespaces": {k: {"inode": n.inode, "initial": n.is_initial} for k, n in view.namespaces.items()},
        "memory": None if mem is None else {
            "version": mem.version, "cgroup": mem.cgroup, "limit_file": mem.limit_file,
            "own_limit": mem.own_limit, "effective_limit": mem.effective_limit,
            "limited_by": mem.limited_by, "usage": mem.usage},
    }


def _show(args) -> int:
    from courselib.cli.main import print_json

    d = show_dict()
    if args.json:
        print_json(d)
        return 0
    where = {True: "the host's initial PID namespace", False: "a PID namespace of its own (a container?)",
             None: "unknown"}[d["in_initial_pid_namespace"]]
    print(f"pid {d['pid']} (NSpid {' '.join(map(str, d['nspid']))}), parent {d['ppid']}, hostname {d['hostname']}")
    print(f"PID namespace: {where}")
    print(f"PID 1 runs: {d['pid1_command']}")
    for kind, ns in d["namespaces"].items():
        flag = {True: "initial", False: "NEW", None: "-"}[ns["initial"]]
        print(f"  {kind:7s} {ns['inode']:>12d}  {flag}")
    m = d["memory"]
    if m is None:
        print("memory cgroup: not visible")
    else:
        lim = "no limit" if m["effective_limit"] is None else f"{format_bytes(m['effective_limit'])} (set on {m['limited_by']})"
        print(f"cgroup {d['cgroup_mode']}: memory cgroup {m['cgroup']} ({m['version']}, {m['limit_file']}): {lim}")
    return 0


def _refuse_overwrite(path: Path) -> None:
    """Refuse before the experiment runs, so a long run is not wasted on a name that is taken."""
    if path.exists():
        raise InputError("exists; not overwritten", file=str(path), hint="remove it first or choose another path")


def _cpu_throttle(args) -> int:
    from courselib.cli.main import print_json
    from courselib.live.cpu import run_throttle
    from courselib.model.cpu import parse_cpu
    from courselib.units import parse_duration

    milli = parse_cpu(args.cpu, field="--cpu")
    seconds = parse_duration(args.seconds, field="--seconds")
    if args.record:
        _refuse_overwrite(Path(args.record))
    run = run_throttle(milli, seconds=seconds, interval=0.5)
    d = run.as_dict()
    if args.record:
        d.update(recorded_on=machine_note())
        write_recorded(args.record, d)
    if args.json:
        print_json(d)
        return 0
    print(f"limit {args.cpu} -> {', '.join(f'{k}={v}' for k, v in run.files_written.items())} (cgroup {run.cgroup_version})")
    print(f"CPUs used, limited:   {' '.join(f'{x:.2f}' for x in run.limited_cpus)}  mean {run.mean_limited:.2f}")
    print(f"CPUs used, unlimited: {' '.join(f'{x:.2f}' for x in run.unlimited_cpus)}  mean {run.mean_unlimited:.2f}")
    print(f"throttled in {run.nr_throttled} of {run.nr_periods} periods")
    return 0


def _unshare(args) -> int:
    from courselib.cli.main import print_json
    from courselib.live.unshare import run_in_new_pid_namespace

    result = run_in_new_pid_namespace()
    if args.record:
        path = Path(args.record)
        _refuse_overwrite(path)
        rec = {k: v for k, v in result.items() if k != "recorded"}
        rec["recorded_on"] = f"{platform.system()} {platform.release()}"
        write_recorded(path, rec)
    if args.json:
        print_json(result)
        return 0
    print(f"$ {result['command']}")
    print(f"inside: pid {result['pid']}, hostname {result['hostname']}, {result['pid_ns']}")
    print("inside, /proc shows: " + ", ".join(f"{p['pid']} {p['comm']}" for p in result["visible_processes"]))
    if result.get("nspid_outside"):
        print(f"outside, the same process is pid {result['host_pid']} (NSpid {' '.join(map(str, result['nspid_outside']))})")
    return 0


def _container(args) -> int:
    from courselib.cli.main import print_json
    from courselib.live.container.runtime import RUNTIMES, memory_cgroup, run_container
    from courselib.units import parse_duration, parse_memory

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise InputError("no command given", field="CMD", hint="e.g. courselib live container -- hostname")
    memory = parse_memory(args.memory, field="--memory") if args.memory else None
    timeout = parse_duration(args.timeout, field="--timeout")
    if args.record:
        _refuse_overwrite(Path(args.record))
    runtimes = RUNTIMES if args.runtime == "auto" else (args.runtime,)
    run = run_container(cmd, memory=memory, timeout=timeout, runtimes=runtimes)
    d = run.as_dict()
    if args.record:
        d.update(recorded_on=machine_note())
        write_recorded(args.record, d)
    if args.json:
        print_json(d)
        return 0
    print(f"$ {' '.join(cmd)}   (runtime: {run.runtime}; image: {run.image['name']}, stand-in for "
          f"{run.image['stand_in_for']})")
    for t in run.runtimes_tried:
        if not t["ran"]:
            print(f"  {t['runtime']} could not run it: {t['error']}")
    i, o = run.inside, run.outside
    rows = [("PID", i.get("pid"), f"{o.get('pid')} (NSpid {' '.join(map(str, o.get('nspid', [])))})"),
            ("hostname", i.get("hostname"), o.get("hostname")),
            ("network interfaces", ", ".join(i.get("interfaces", [])), "(the host's own)"),
            ("cgroup (v1 memory / v2)", memory_cgroup(i.get("cgroup", [])), memory_cgroup(o.get("cgroup", []))),
            ("kernel", i.get("kernel"), o.get("kernel"))]
    print(f"  {'':24s} {'inside':32s} outside (the host)")
    for k, a, b in rows:
        print(f"  {k:24s} {str(a):32s} {b}")
    print(f"  / holds: {' '.join(i.get('root', []))}")
    print("  namespaces new to the container: " + ", ".join(
        f"{k} {o['namespaces'][k]} (host {o['host_namespaces'].get(k)})" for k in o.get("new_namespaces", [])))
    if run.stdout.strip():
        print("  output: " + run.stdout.strip().replace("\n", "\n          "))
    lim = "no limit" if memory is None else format_bytes(memory)
    print(f"  exit status {run.exit_code}; memory limit {lim}; OOM kills in its cgroup: {run.oom_kill_count}"
          + (" (OOMKilled)" if run.oom_killed else ""))
    for line in run.kernel_log:
        if "Killed process" in line:
            print(f"  kernel: {line}")
    return 0


def _container_oom(args) -> int:
    from courselib.cli.main import print_json
    from courselib.live.container.runtime import oom_experiments

    if args.record:
        _refuse_overwrite(Path(args.record))
    d = {"runs": oom_experiments(), "recorded_on": machine_note()}
    if args.record:
        write_recorded(args.record, d)
    if args.json:
        print_json(d)
        return 0
    for r in d["runs"]:
        p = r["prediction"]
        print(f"{r['case']}: $ {' '.join(r['command'])} (memory limit {format_bytes(r['memory_limit'])})")
        print(f"  container exit status {r['exit_code']} (courselib predicted {p['container_exit_code']}); "
              f"OOM kills {r['oom_kill_count']} (predicted {p['oom_kill']}, victim {p['victim']})")
        for line in r["kernel_log"]:
            if "Killed process" in line:
                print(f"  kernel: {line}")
    return 0

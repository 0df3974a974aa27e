"""``courselib kube``: a real Kubernetes control plane on this machine, and replays against the model.

    courselib kube up [--nodes N] [--gpus-per-node G] [--features nvlink:K] [--gang] [--with NAME]
                      [--topology rack:8,block:4] [--api-qps N] [--port P]
    courselib kube status [--json]
    courselib kube replay WORKLOAD.yaml [--compare] [--json] [--record FILE] [--policy P]
    courselib kube validate FILE...
    courselib kube down

Needs the binaries that ``make setup-k8s`` builds once (etcd and Kubernetes from the Go modules
pinned in ``k8s/``), openssl and the Kubernetes Python client; no root. Elsewhere each command
says so in one line and touches nothing.
"""
from __future__ import annotations

import sys


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def _shape(args):
    from courselib.live import kube
    return kube.KubeShape(nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                          features=kube.parse_shape_features(args.features), gang=args.gang,
                          base_port=args.port, with_=tuple(dict.fromkeys(args.with_ or ())),
                          api_qps=args.api_qps, topology=kube.parse_topology(args.topology))


def _up(args) -> int:
    from courselib.live import kube
    cp = kube.up(_shape(args), say=_say)
    print(f"local Kubernetes {kube.KUBERNETES_VERSION} up: {cp.shape.describe()}")
    print(f"use it with:    export KUBECONFIG={cp.kubeconfig}")
    return 0


def _down(args) -> int:
    from courselib.live import kube
    if kube.load() is None:
        print("no local Kubernetes control plane is up; nothing to stop")
        return 0
    out = kube.down(say=_say)
    if args.json:
        from courselib.cli.main import print_json
        print_json(out)
    else:
        for p in out["stopped"]:
            print(f"stopped {p['role']} (PID {p['pid']})")
    if out["left"]:
        print(f"courselib: PIDs {out['left']} did not stop; the state file is kept", file=sys.stderr)
        return 1
    return 0


def _status(args) -> int:
    from courselib.live import kube
    info = kube.status()
    if args.json:
        from courselib.cli.main import print_json
        print_json(info)
        return 0
    if "processes" not in info:
        print("no local Kubernetes control plane is up (start one with `courselib kube up`)")
        return 0
    print(f"local Kubernetes {info['versions'].get('kubernetes', '?')} "
          f"{'up' if info['up'] else 'BROKEN (some processes died; run `courselib kube down`)'}: "
          f"{info['shape']}")
    print(f"state directory: {info['state_dir']}")
    print(f"KUBECONFIG={info['kubeconfig']}  (API server {info['server']})")
    for p in info["processes"]:
        print(f"  {p['role']:<24} PID {p['pid']:<8} {'running' if p['alive'] else 'gone'}")
    if "nodes" in info:
        print(f"  {info['nodes']} nodes registered, {info['gpus']} GPUs allocatable")
    return 0


def _replay(args) -> int:
    from courselib.io.workload import load_workload
    from courselib.live import kube
    from courselib.live.kube import plan as kube_plan, replay as kube_replay, result as kube_result

    from courselib.cli.gang import _option
    from courselib.cli.replay import report
    workload = load_workload(args.workload)
    cp = kube.running()
    gang = cp.shape.gang if cp is not None else None
    if args.policy is not None:
        gang = args.policy == "kube-gang"
    plan = kube_plan.plan_replay(workload, policy=args.policy, gang=gang, file=args.workload,
                                 options=dict(_option(o) for o in args.set))
    if cp is None:
        kube.check_available()
        from courselib.errors import CourseError
        raise CourseError("no local Kubernetes control plane is up",
                          hint=f"start one with `courselib kube up {plan.shape.cli_args()}`")
    if args.record and cp.shape.api_qps:
        from courselib.errors import CourseError
        raise CourseError(f"a recorded run keeps the controller manager's default client rate; this control "
                          f"plane runs it at {cp.shape.api_qps} requests/s, which changes how fast (and so "
                          "in which order) a Job's pods are created",
                          hint="`courselib kube down`, then `courselib kube up` without --api-qps")
    say = (lambda m: None) if args.json else _say
    if cp.shape.gang == plan.shape.gang and cp.shape.core_gates() != plan.shape.core_gates() and cp.all_ours():
        # a topology workload under native gang scheduling needs TopologyAwareWorkloadScheduling, a
        # feature gate of the running binaries: the control plane is restarted with it, on its ports
        import dataclasses
        say(f"the local control plane is {cp.shape.describe()}, the workload needs "
            f"{plan.shape.describe()}: restarting it with that shape")
        out = kube.down(say=say)
        if out["left"]:
            from courselib.errors import CourseError
            raise CourseError(f"PIDs {out['left']} of the control plane did not stop",
                              hint="run `courselib kube down`, then the replay again")
        cp = kube.up(dataclasses.replace(plan.shape, base_port=cp.shape.base_port, with_=cp.shape.with_,
                                         api_qps=cp.shape.api_qps), say=say)
    result = kube_replay.run_replay(cp, plan, say=say)
    return report(args, result, kube_result)


def _validate(args) -> int:
    from courselib.live import kube
    from courselib.live.kube import validate as kube_validate
    cp = kube.running()
    if cp is None:
        kube.check_available(client=False)  # quick: the binaries, not the (slow to import) client
        from courselib.errors import CourseError
        raise CourseError("no local Kubernetes control plane is up",
                          hint="start one with `courselib kube up` (validate asks its API server)")
    findings = kube_validate.validate_files(cp, args.files)
    if args.record:
        _say(f"recorded to {kube_validate.record(args.record, findings, cp.versions)}")
    if args.json:
        from courselib.cli.main import print_json
        print_json({"files": args.files, "kubernetes": kube.KUBERNETES_VERSION,
                    "documents": [f.to_dict() for f in findings],
                    "rejected": sum(f.rejected for f in findings),
                    "not_validated": sum(not f.validated for f in findings)})
    else:
        for f in findings:
            print(f.text())
        bad = sum(f.rejected for f in findings)
        unchecked = sum(not f.validated for f in findings)
        dropped = sum(bool(f.dropped) for f in findings)
        print(f"{len(findings)} document{'s' if len(findings) != 1 else ''}: "
              f"{len(findings) - bad - unchecked} accepted ({dropped} with fields dropped), {bad} rejected"
              f"{f', {unchecked} not validated' if unchecked else ''} by the API server "
              f"(Kubernetes {kube.KUBERNETES_VERSION}, server-side dry run)")
    return 1 if any(f.rejected for f in findings) else 0



def _gates(args) -> int:
    from courselib.live.kube import gates as kube_source
    gates = kube_source.feature_gates()
    if args.record:
        _say(f"recorded to {kube_source.record(args.record, gates)}")
    if args.json:
        from dataclasses import asdict
        from courselib.cli.main import print_json
        print_json({"version": kube_source.KUBERNETES_VERSION, "file": kube_source.FEATURES_FILE,
                    "gates": [asdict(g) for g in gates]})
    else:
        print(kube_source.format_gates(gates))
    return 0


def _kueue_config(args) -> int:
    from courselib.errors import InputError
    from courselib.live.kube.kueue import config as kueue_config
    if bool(args.file) == bool(args.cases):
        raise InputError("give a configuration FILE or --cases (not both)", field="kube kueue-config")
    if args.record and not args.cases:
        raise InputError("--record writes the --cases run", field="--record", hint="add --cases")
    if args.cases:
        results = kueue_config.check_cases()
        if args.record:
            _say(f"recorded to {kueue_config.record(args.record, results)}")
        if args.json:
            from courselib.cli.main import print_json
            print_json({"kueue": kueue_config.manager.KUEUE_VERSION, "cases": [r.to_dict() for r in results]})
        else:
            print(kueue_config.format_cases(results))
        return 0
    got, line = kueue_config.check_file(args.file)
    if args.json:
        from courselib.cli.main import print_json
        print_json({**got.to_dict(), "line": line, "field": got.field})
    else:
        where = f"{args.file}:{line}" if line else args.file
        field = f" {got.field}:" if got.field and not got.accepted else ""
        print(f"{where}:{field} {got.summary()} (the Kueue {got.version} manager)")
    return 0 if got.accepted else 1


def register(subparsers) -> None:
    from courselib.live.kube import BASE_PORT, extension
    p = subparsers.add_parser(
        "kube", help="a real local Kubernetes control plane: up, down, status, replay, validate",
        description="A real Kubernetes control plane on this machine (etcd, kube-apiserver, "
                    "kube-scheduler, kube-controller-manager, built by `make setup-k8s`) with fake "
                    f"GPU nodes, in a temporary directory on ports {BASE_PORT}+.")
    sub = p.add_subparsers(dest="kube_command", metavar="SUBCOMMAND")

    up = sub.add_parser("up", help="start the control plane and register fake GPU nodes (idempotent)")
    up.add_argument("--nodes", type=int, default=4, help="fake nodes (default 4)")
    up.add_argument("--gpus-per-node", type=int, default=8, help="nvidia.com/gpu per node (default 8)")
    up.add_argument("--features", default=None,
                    help="node feature labels: NAME (every node) or NAME:K (node1..nodeK), "
                         "comma-separated, e.g. nvlink:2")
    up.add_argument("--gang", action="store_true",
                    help="turn on native gang scheduling (feature gate GenericWorkload, API scheduling.k8s.io/v1beta1); "
                         "with --topology also TopologyAwareWorkloadScheduling (topology-aware PodGroups)")
    up.add_argument("--with", dest="with_", action="append", choices=extension.names(), default=None,
                    metavar="|".join(extension.names()),
                    help="also run an extension (built by `make setup-k8s`): kueue is Kueue's manager "
                         "with its CRDs and webhooks; on a control plane already up, adds it")
    up.add_argument("--topology", default=None, metavar="LEVEL:SIZE,...",
                    help="label the nodes by topology level, outermost first, e.g. rack:8,block:4 "
                         "(nodes 1-8 rack0, 9-16 rack1; blocks of 4): courselib/topology-rack=rack0 ... "
                         "and kubernetes.io/hostname (a replay of a workload with a topology sets it)")
    up.add_argument("--api-qps", type=int, default=None, metavar="N",
                    help="the controller manager's client rate in requests/s (default: Kubernetes' "
                         "20, burst 30); a higher rate creates a large Job's pods sooner, and can "
                         "change how two Jobs' pods interleave (recorded runs keep the default)")
    up.add_argument("--port", type=int, default=BASE_PORT,
                    help=f"first of the ports used (default {BASE_PORT}: etcd, +1 etcd peer, +2 API "
                         "server, +3 scheduler, +4 controller manager, +5..+7 Kueue's webhook, "
                         "health and metrics)")
    up.set_defaults(func=_up)

    down = sub.add_parser("down", help="stop every process of the control plane, by PID")
    down.add_argument("--json", action="store_true", help="machine-readable output")
    down.set_defaults(func=_down)

    st = sub.add_parser("status", help="is the control plane up; its processes and nodes")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.set_defaults(func=_status)

    rp = sub.add_parser("replay", help="submit a workload's jobs as real batch/v1 Jobs and record "
                                       "what the real scheduler bound")
    rp.add_argument("workload", help="WORKLOAD.yaml (see examples/workloads/)")
    rp.add_argument("--compare", action="store_true",
                    help="also run courselib's policy and report the agreement (exit 1 if < 100%%)")
    rp.add_argument("--policy", default=None,
                    help="the model to compare with: kube-default, kube-gang or kueue (default: "
                         "kube-gang when the control plane runs with --gang, else kube-default; "
                         "kueue needs `kube up --with kueue`)")
    rp.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                    help="a model option of --policy kueue, e.g. timeout=1800, backoff_base=60, "
                         "wait_for_pods_ready=false (repeatable)")
    rp.add_argument("--json", action="store_true", help="machine-readable output")
    rp.add_argument("--record", metavar="FILE.json", default=None,
                    help="also write the replay as JSON (how the chapter's recorded runs are made)")
    rp.set_defaults(func=_replay)

    va = sub.add_parser("validate", help="server-side dry run of manifests against the real API server")
    va.add_argument("files", nargs="+", help="YAML manifests")
    va.add_argument("--json", action="store_true", help="machine-readable output")
    va.add_argument("--record", metavar="FILE.json", default=None,
                    help="also write the findings as JSON (how the chapter's recorded runs are made)")
    va.set_defaults(func=_validate)

    ga = sub.add_parser("gates", help="the pinned version's feature gates the course discusses, read "
                                      "from its own source (pkg/features/kube_features.go)")
    ga.add_argument("--json", action="store_true", help="machine-readable output")
    ga.add_argument("--record", metavar="FILE.json", default=None,
                    help="also write them as JSON (the fallback the book shows without Go)")
    ga.set_defaults(func=_gates)

    kc = sub.add_parser("kueue-config", help="ask the real Kueue manager binary how it reads a "
                                             "configuration (strict decoding, defaults; no control plane)")
    kc.add_argument("file", nargs="?", default=None, help="a Kueue Configuration (YAML)")
    kc.add_argument("--cases", action="store_true",
                    help="the configurations the book asks about (waitForPodsReady left out, "
                         "enable: true, no timeout, timeout 30m, v1beta1)")
    kc.add_argument("--json", action="store_true", help="machine-readable output")
    kc.add_argument("--record", metavar="FILE.json", default=None,
                    help="with --cases: also write the answers as JSON (the book's recorded run)")
    kc.set_defaults(func=_kueue_config)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

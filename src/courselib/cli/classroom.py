"""``courselib classroom``: running a class — a class server on one machine, grading on Kubernetes.

- ``classroom hub up|down|status|link``: a real JupyterHub on loopback (:mod:`courselib.live.hub`),
  each student's home pulled from the course with an nbgitpuller link; ``courselib grade --many HOMES``
  grades the homes.
- ``classroom k8s-job DIR --queue Q -o FILE``: an Indexed Job that grades a folder of submissions, one
  index per submission, queued by Kueue (:mod:`courselib.grading.kubejob`).
"""
from __future__ import annotations

import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("classroom", help="a class server (JupyterHub) on one machine; grading a class on "
                                                "Kubernetes with Kueue")
    sub = p.add_subparsers(dest="classroom_command", metavar="COMMAND")

    h = sub.add_parser("hub", help="a real JupyterHub on 127.0.0.1 for a workshop or a test (up, down, status, link)")
    hs = h.add_subparsers(dest="hub_command", metavar="COMMAND")
    u = hs.add_parser("up", help="start the hub: configurable-http-proxy, JupyterHub, a notebook server per student",
                      description="Starts configurable-http-proxy on 127.0.0.1:PORT and JupyterHub behind it (a "
                                  "shared password for any user name; each student's notebook server runs as you, "
                                  "HOME in the hub's temporary folder). Stop it with `courselib classroom hub down`.")
    u.add_argument("--course", default=".", metavar="REPO",
                   help="the git repository nbgitpuller links pull into each home (a path or a URL; default: here)")
    u.add_argument("--branch", default="main", help="the branch the links pull (default main)")
    u.add_argument("--port", type=int, default=None, help="the public port (default 18800; the hub takes PORT..PORT+2)")
    u.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each daemon (default 60)")
    u.add_argument("--expose-app", action="store_true", help=argparse_suppress())
    u.add_argument("--json", action="store_true", help="print the status as JSON")
    u.set_defaults(func=_hub_up)
    d = hs.add_parser("down", help="stop every process of the hub by PID; remove its folder (the homes too)")
    d.add_argument("--json", action="store_true", help="print what was stopped as JSON")
    d.set_defaults(func=_hub_down)
    s = hs.add_parser("status", help="is the hub up; its URL, homes and processes")
    s.add_argument("--json", action="store_true", help="print one JSON document")
    s.set_defaults(func=_hub_status)
    k = hs.add_parser("link", help="print the nbgitpuller link that opens a lab in each student's home")
    k.add_argument("--lab", help="the lab to open, e.g. 08-gang-cost (default: the course folder)")
    k.add_argument("--repo", help="pull this repository instead of the hub's course (a class's own template)")
    k.add_argument("--hub", help="the hub's URL (default: the running hub's); e.g. https://hub.example.edu")
    k.add_argument("--branch", help="the branch (default: the hub's)")
    k.set_defaults(func=_hub_link)
    o = hs.add_parser("pod", help="write the pod KubeSpawner makes for a student under the instructors' page's Zero to "
                                  "JupyterHub settings (validate it: courselib kube validate FILE)")
    o.add_argument("student", metavar="STUDENT", help="the student's user name")
    o.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the pod (YAML)")
    o.add_argument("--image", default="all-or-nothing:latest", help="the course's image (default all-or-nothing:latest)")
    o.add_argument("--namespace", default="default", help="the namespace (default default)")
    o.set_defaults(func=_hub_pod)
    h.set_defaults(func=lambda args: (h.print_help(), 2)[1])

    j = sub.add_parser("k8s-job", help="write an Indexed Job that grades a folder of submissions, queued by Kueue",
                       description="One index per submission (DIR/STUDENT.ipynb or DIR/STUDENT/…/LAB.ipynb), each "
                                   "pod running `courselib grade` on its submission; the Job is labelled for the "
                                   "Kueue LocalQueue Q and created suspended (Kueue admits it within quota).")
    j.add_argument("dir", metavar="DIR", help="the folder of submissions (as `courselib grade --many` reads it)")
    j.add_argument("--queue", required=True, metavar="Q", help="the Kueue LocalQueue (label kueue.x-k8s.io/queue-name)")
    j.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the YAML (ConfigMap + Job)")
    j.add_argument("--name", default="grade", help="the Job's name (default grade)")
    j.add_argument("--namespace", default="default", help="its namespace (default default)")
    j.add_argument("--image", default="courselib-grader:latest",
                   help="the instructor's grading image (the course with solutions/ at /course; never the students')")
    j.add_argument("--claim", default="class", help="the PersistentVolumeClaim holding submissions/ and reports/ "
                                                    "(default class)")
    j.add_argument("-j", "--parallelism", type=int, default=4, help="pods at a time (default 4; Kueue admits the "
                                                                    "Job when its queue has quota for them all)")
    j.add_argument("--cpu", default="1", help="each pod's CPU request and limit (default 1)")
    j.add_argument("--memory", default="2Gi", help="each pod's memory request and limit (default 2Gi)")
    j.add_argument("--lab", help="grade only this lab")
    j.add_argument("--source", help="the instructor's source inside the image (default: solutions/)")
    j.add_argument("--roster", metavar="CSV", help="the seed of each student (columns student,seed)")
    j.add_argument("--timeout", type=float, default=30.0, help="seconds per cell of the student's code (default 30)")
    j.add_argument("--time-limit", type=float, default=600.0, help="wall-clock seconds per grading (default 600)")
    j.set_defaults(func=_k8s_job)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def argparse_suppress():
    import argparse
    return argparse.SUPPRESS


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def _hub_up(args) -> int:
    from courselib.cli.main import print_json
    from courselib.live import hub

    h = hub.up(course=args.course, port=args.port or hub.BASE_PORT, branch=args.branch, timeout=args.timeout,
               expose_app=args.expose_app, say=_say)
    info = hub.status(h)
    if args.json:
        print_json(info)
    else:
        print(f"class server: {h.url}/hub/login  (any user name; password: {h.password()})")
        print(f"nbgitpuller link: {info['link']}")
        print(f"homes: {h.homes}   (grade them: courselib grade --many {h.homes} --gradebook grades.csv)")
        print("stop it: courselib classroom hub down")
    return 0


def _hub_down(args) -> int:
    from courselib.cli.main import print_json
    from courselib.live import hub

    out = hub.down(say=_say)
    if args.json:
        print_json(out)
    return 1 if out.get("left") else 0


def _hub_status(args) -> int:
    from courselib.cli.main import print_json
    from courselib.live import hub

    info = hub.status()
    if args.json:
        print_json(info)
    elif not info["up"]:
        print("no class server is up" + (f" (a stale record: {info['state_file']})" if "state_dir" in info else ""))
    else:
        print(f"up: {info['url']}  homes {info['homes']}  students: {', '.join(info['students']) or 'none yet'}")
        for p in info["processes"]:
            print(f"  {p['role']:<12} PID {p['pid']}")
    return 0 if info["up"] else 1


def _hub_link(args) -> int:
    from courselib.live import hub

    if args.hub:
        course = args.repo or hub.course_url(".")
        print(hub.pull_link(args.hub, course, branch=args.branch or "main", lab=args.lab))
        return 0
    h = hub.require_up()
    print(hub.pull_link(h.url, args.repo or h.course, branch=args.branch or h.branch, lab=args.lab))
    return 0


def _hub_pod(args) -> int:
    import yaml

    from courselib.grading.files import atomic_write
    from courselib.live import hub

    pod = hub.kubespawner_pod(args.student, image=args.image, namespace=args.namespace)
    atomic_write(Path(args.output), yaml.safe_dump(pod, sort_keys=False))
    print(f"{args.output}: the pod {pod['metadata']['name']} KubeSpawner makes for {args.student} "
          f"(image {args.image}); check it with courselib kube validate {args.output}")
    return 0


def _k8s_job(args) -> int:
    from courselib.grading import kubejob
    from courselib.grading.files import atomic_write

    docs = kubejob.manifests(Path(args.dir), queue=args.queue, name=args.name, namespace=args.namespace,
                             image=args.image, claim=args.claim, parallelism=args.parallelism, cpu=args.cpu,
                             memory=args.memory, lab=args.lab, source=Path(args.source) if args.source else None,
                             roster=Path(args.roster) if args.roster else None, timeout=args.timeout,
                             time_limit=args.time_limit)
    atomic_write(Path(args.output), kubejob.dump(docs))
    job = docs[1]["spec"]
    print(f"{args.output}: Indexed Job {args.name} ({job['completions']} submissions, {job['parallelism']} at a time) "
          f"for Kueue queue {args.queue}; apply it with kubectl apply -f {args.output}")
    return 0

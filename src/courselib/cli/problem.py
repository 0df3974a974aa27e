"""``courselib problem TOPIC [--seed N] [--difficulty easy|medium|hard] [--solve] [--json]``: endless practice.

Like OSTEP's homework simulators: the run echoes its arguments first (``ARG topic gang``, ``ARG seed 7``,
``ARG difficulty easy``) so anyone can generate the same problem; ``--solve`` adds the answer and the
worked trace of why, computed by courselib's engines (never a stored answer). ``--list`` (or no TOPIC)
lists the topics. Every argument mistake is one line on stderr and exit status 2.
"""
from __future__ import annotations

import sys

from courselib.errors import InputError

USAGE = "courselib problem TOPIC [--seed N] [--difficulty easy|medium|hard] [--solve] [--json]"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "problem", help="a seeded practice problem, with --solve its worked solution",
        usage=USAGE,
        description="Generate a practice problem from a seed; --solve prints the answer and a "
                    "step-by-step trace of why, computed by courselib.")
    p.add_argument("topic", nargs="?", metavar="TOPIC", help="the topic (see --list)")
    p.add_argument("--seed", default="0", help="a whole number >= 0 (default 0): same seed, same problem")
    p.add_argument("--difficulty", default="easy", help="easy, medium or hard (default easy)")
    p.add_argument("--solve", action="store_true", help="also print the answer and the worked trace")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--list", action="store_true", help="list the topics and exit")
    p.set_defaults(func=cmd_problem)

    def one_line_error(message: str):  # argparse's own errors, as one line like every other mistake
        print(f"courselib problem: {message}; usage: {USAGE}", file=sys.stderr)
        sys.exit(2)
    p.error = one_line_error
    parse_known = p.parse_known_args

    def parse_known_args(args=None, namespace=None):  # the top parser would print usage + error: two lines
        ns, extras = parse_known(args, namespace)
        if extras:
            one_line_error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras
    p.parse_known_args = parse_known_args


def parse_seed(text: str) -> int:
    try:
        seed = int(str(text).strip())
    except ValueError:
        seed = None
    if seed is None or seed < 0:
        raise InputError(f"{text!r} is not a whole number >= 0", field="--seed", hint="e.g. --seed 7")
    return seed


def check_args(topic: str, seed: str, difficulty: str) -> tuple[str, int, str]:
    """Validate the three arguments that define a problem (one-line errors naming the argument)."""
    from courselib.problems import DIFFICULTIES, TOPICS

    if topic not in TOPICS:
        raise InputError(f"unknown topic {topic!r}", field="TOPIC", hint=f"choose one of: {', '.join(TOPICS)}")
    if difficulty not in DIFFICULTIES:
        raise InputError(f"unknown difficulty {difficulty!r}", field="--difficulty",
                         hint=f"choose one of: {', '.join(DIFFICULTIES)}")
    return topic, parse_seed(seed), difficulty


def topic_list() -> list[tuple[str, str]]:
    """(topic, summary) for every topic; a topic not written yet says so."""
    from courselib.problems import TOPICS, available, topic_module

    ready = set(available())
    return [(t, topic_module(t).SUMMARY if t in ready else "(not available yet)") for t in TOPICS]


def cmd_problem(args) -> int:
    from courselib import problems
    from courselib.problems import render

    if args.list or args.topic is None:
        width = max(len(t) for t in problems.TOPICS)
        print("topics (courselib problem TOPIC --seed N --difficulty easy|medium|hard --solve):")
        for topic, summary in topic_list():
            print(f"  {topic:<{width}}  {summary}")
        return 0 if args.list else 2
    topic, seed, difficulty = check_args(args.topic, args.seed, args.difficulty)
    if topic not in problems.available():
        raise InputError(f"the {topic!r} problems are not available yet in this version of courselib",
                         field="TOPIC", hint=f"try one of: {', '.join(problems.available()) or 'none yet'}")
    problem = problems.generate(topic, seed, difficulty)
    solution = problems.solve(problem) if args.solve else None
    if args.json:
        from courselib.cli.main import print_json
        print_json(render.document(problem, solution))
    else:
        print(render.text(problem, solution))
    return 0

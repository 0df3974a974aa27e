"""Entry point of the ``courselib`` command.

Each command family lives in its own module under ``courselib.cli`` and exposes
``register(subparsers)``; the parser it adds sets ``func(args) -> int``. A ``CourseError``
is printed as one line on stderr with exit status 2; nothing prints a traceback for a
user's mistake.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys

from courselib import __version__
from courselib.errors import CourseError

# Command families, in the order `courselib --help` lists them.
FAMILIES = ["live", "gang", "oom", "cost", "barrier", "files", "slurm", "kube", "labs", "classroom", "problem"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="courselib",
        description="All or Nothing: simulators, calculators and linters for containers, "
                    "cgroups, the OOM killer and gang scheduling.")
    parser.add_argument("--version", action="version", version=f"courselib {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for family in FAMILIES:
        name = f"courselib.cli.{family}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # family not built yet
                continue
            raise
        module.register(sub)
    return parser


def print_json(obj) -> None:
    """Machine output: one JSON document, keys in a stable order."""
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def main(argv: list[str] | None = None) -> int:
    from courselib.grading.notebook import skip_the_iri_parser

    skip_the_iri_parser()   # `courselib labs ...` reads notebooks with nbformat: 1.5-3.5 s less for each
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CourseError as err:
        print(f"courselib: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        from courselib.live.cleanup import Terminated
        if isinstance(err, Terminated):
            print(f"courselib: stopped by {err}; what it started was cleaned up", file=sys.stderr)
            return err.exit_status
        print("courselib: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Read an sbatch script the way Slurm does, and say what it asks for.

Slurm's rules (sbatch(1); ``src/sbatch/opt.c``; corpus README):

* only lines that begin at column 0 with ``#SBATCH`` (or the old ``#SLURM``) are directives, and
  parsing stops at the
  first line whose first non-blank character is not ``#`` — every later ``#SBATCH`` line
  (including one inside a heredoc) is silently ignored;
* an unescaped ``#`` inside a directive starts a comment; ``"``/``'`` group; ``\\`` escapes; an
  unmatched quote or a word starting with ``:`` makes sbatch stop with an error;
* several options may share a line, and a later occurrence overrides an earlier one;
* a directive line containing ``hetjob`` (old name ``packjob``) *anywhere* — sbatch searches the
  line with ``strcasestr`` — starts a new heterogeneous-job component;
  job-wide options (``--time``, ``--job-name``, ``--account``, ...) carry into later components,
  resource options (``--nodes``, ``--partition``, ``--gres``, ``--constraint``) do not;
* ``--time`` takes ``M``, ``M:S``, ``H:M:S``, ``D-``, ``D-H``, ``D-H:M``, ``D-H:M:S`` (so ``15`` is
  15 minutes and ``3:00`` is 3 minutes); seconds round up to a whole minute, and a limit of zero
  (``0``, ``0:0:0``) is no limit at all, like ``UNLIMITED``;
* sbatch refuses a script whose first two bytes are not ``#!`` (src/sbatch/sbatch.c L690-694 at
  slurm-26.05 @531c4b2e: "This does not look like a batch script"), and so does this reader when
  ``strict``; ``courselib lint`` (not strict) reports it as S001.

``read_sbatch(path)`` / ``parse_sbatch(text, file=...)`` return an :class:`SbatchReading`.
A value Slurm would reject (``--nodes=two``) is a located :class:`~courselib.errors.InputError`
when ``strict`` (the default), or a recorded problem when not (what ``courselib lint`` uses).
Options sbatch does not know are reported in ``unknown_options``, never a crash.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from courselib.errors import CourseError, InputError
from courselib.io.policy import check_count
from courselib.io.yamlfile import read_text
from courselib.model.workload import Job

MAGIC = "#SBATCH"
OLD_MAGIC = "#SLURM"       # still read by sbatch, with "Change from #SLURM to #SBATCH"

# Long options of sbatch(1) (Slurm 24.x/25.x): name -> "req" (needs a value), "opt" (value only
# with '='), "none" (a flag). Old names sbatch still accepts are included.
LONG_OPTIONS: dict[str, str] = {
    "account": "req", "acctg-freq": "req", "array": "req", "batch": "req", "bb": "req",
    "bbf": "req", "begin": "req", "chdir": "req", "cluster-constraint": "req",
    "clusters": "req", "comment": "req", "constraint": "req", "container": "req",
    "container-id": "req", "contiguous": "none", "core-spec": "req",
    "cores-per-socket": "req", "cpu-freq": "req", "cpus-per-gpu": "req",
    "cpus-per-task": "req", "deadline": "req", "delay-boot": "req", "dependency": "req",
    "distribution": "req", "error": "req", "exclude": "req", "exclusive": "opt",
    "export": "req", "export-file": "req", "extra": "req", "extra-node-info": "req",
    "get-user-env": "opt", "gid": "req", "gpu-bind": "req", "gpu-freq": "req", "gpus": "req",
    "gpus-per-node": "req", "gpus-per-socket": "req", "gpus-per-task": "req", "gres": "req",
    "gres-flags": "req", "help": "none", "hint": "req", "hold": "none", "ignore-pbs": "none",
    "input": "req", "job-name": "req", "kill-on-invalid-dep": "req", "licenses": "req",
    "mail-type": "req", "mail-user": "req", "mcs-label": "req", "mem": "req",
    "mem-bind": "req", "mem-per-cpu": "req", "mem-per-gpu": "req", "mincpus": "req",
    "network": "req", "nice": "opt", "no-kill": "opt", "no-requeue": "none",
    "nodefile": "req", "nodelist": "req", "nodes": "req", "ntasks": "req",
    "ntasks-per-core": "req", "ntasks-per-gpu": "req", "ntasks-per-node": "req",
    "ntasks-per-socket": "req", "oom-kill-step": "opt", "open-mode": "req", "output": "req",
    "overcommit": "none", "oversubscribe": "none", "parsable": "none", "partition": "req",
    "power": "req", "prefer": "req", "priority": "req", "profile": "req", "propagate": "opt",
    "qos": "req", "quiet": "none", "reboot": "none", "requeue": "none", "reservation": "req",
    "resv-ports": "opt", "segment": "req", "signal": "req", "sockets-per-node": "req",
    "spread-job": "none", "stepmgr": "none", "switches": "req", "test-only": "none",
    "thread-spec": "req", "threads-per-core": "req", "time": "req", "time-min": "req",
    "tmp": "req", "tres-bind": "req", "tres-per-task": "req", "uid": "req", "usage": "none",
    "use-min-nodes": "none", "verbose": "none", "version": "none", "wait": "none",
    "wait-all-nodes": "req", "wckey": "req", "wrap": "req", "x11": "opt",
    # older spellings sbatch still maps
    "workdir": "req", "share": "none", "mem_bind": "req", "cpu_bind": "req",
}
# Short options -> long name.
SHORT_OPTIONS: dict[str, str] = {
    "A": "account", "a": "array", "b": "begin", "B": "extra-node-info", "c": "cpus-per-task",
    "C": "constraint", "d": "dependency", "D": "chdir", "e": "error", "F": "nodefile",
    "G": "gpus", "h": "help", "H": "hold", "i": "input", "J": "job-name", "k": "no-kill",
    "L": "licenses", "m": "distribution", "M": "clusters", "n": "ntasks", "N": "nodes",
    "o": "output", "O": "overcommit", "p": "partition", "q": "qos", "Q": "quiet",
    "s": "oversubscribe", "S": "core-spec", "t": "time", "v": "verbose", "V": "version",
    "w": "nodelist", "W": "wait", "x": "exclude",
}
ALIASES = {"workdir": "chdir", "share": "oversubscribe", "mem_bind": "mem-bind",
           "cpu_bind": "cpu-bind"}
# Job-wide options that carry into later hetjob components (corpus README, opt.c).
PROPAGATING = {"time", "job-name", "output", "error", "dependency", "account", "qos",
               "reservation", "array", "mail-type", "mail-user", "chdir", "comment", "begin",
               "requeue", "no-requeue", "signal", "open-mode", "wckey", "deadline", "nice",
               "priority", "licenses", "clusters"}

_PLACEHOLDER = re.compile(r"<[^<>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")


@dataclass(frozen=True)
class Directive:
    """One option as Slurm would see it: ``--nodes=2`` on line 3 of component 0."""

    line: int
    option: str            # canonical long name, e.g. "nodes"; or the unknown name as written
    value: str | None
    written: str           # as written, e.g. "-N 2" or "--nodes=2"
    component: int = 0
    known: bool = True


@dataclass(frozen=True)
class Problem:
    """A value Slurm would reject, kept (non-strict mode) so lint can report all of them."""

    line: int
    field: str
    message: str
    hint: str | None = None


@dataclass(frozen=True)
class ArraySpec:
    """``--array=1-10%1``: ``tasks`` indices, at most ``max_running`` at once."""

    text: str
    tasks: int
    max_running: int | None


@dataclass(frozen=True)
class TimeLimit:
    """A ``--time`` value: whole minutes (``None`` = unlimited) and the form it was written in."""

    text: str
    minutes: int | None
    form: str              # "M", "M:S", "H:M:S", "D-", "D-H", "D-H:M", "D-H:M:S", "UNLIMITED"


@dataclass(frozen=True)
class GpuSource:
    """One way the script asked for GPUs, e.g. ``--gres=gpu:a100:4`` -> per node 4, type a100."""

    option: str
    line: int
    per: str               # "node", "task", "job"
    count: int
    gpu_type: str | None = None


@dataclass(frozen=True)
class SbatchComponent:
    """One (heterogeneous) job component: what it asks of the cluster."""

    index: int
    nodes: int | None
    nodes_max: int | None
    ntasks: int | None
    ntasks_per_node: int | None
    gpus_per_node: int | None
    gpu_type: str | None
    total_gpus: int | None
    total_gpus_reason: str | None
    gpu_sources: tuple[GpuSource, ...]
    constraint: str | None
    exclusive: bool
    time_limit: TimeLimit | None
    partition: str | None
    mem: str | None
    first_line: int
    options: tuple[tuple[str, str | None, int], ...]   # (option, value, line), in order

    @property
    def time_limit_min(self) -> int | None:
        return self.time_limit.minutes if self.time_limit else None

    def option(self, name: str) -> str | None:
        """The last value given for ``name`` (``None`` if absent or a bare flag)."""
        for opt, value, _ in reversed(self.options):
            if opt == name:
                return value
        return None

    def has(self, name: str) -> bool:
        return any(opt == name for opt, _, _ in self.options)

    def line_of(self, name: str) -> int | None:
        for opt, _, line in reversed(self.options):
            if opt == name:
                return line
        return None


@dataclass(frozen=True)
class SbatchReading:
    """What an sbatch script asks for, with the lines each answer came from."""

    file: str | None
    has_shebang: bool                      # first two bytes are "#!" (sbatch refuses otherwise)
    shebang_line: int | None               # where a "#!" line was found, if not line 1
    first_command_line: int | None         # directives after this line are ignored by Slurm
    components: tuple[SbatchComponent, ...]
    directives: tuple[Directive, ...]
    ignored_directives: tuple[tuple[int, str], ...]    # (line, text) after the first command
    unknown_options: tuple[tuple[int, str], ...]       # (line, option as written)
    stray_arguments: tuple[tuple[int, str], ...]       # non-option words in a directive
    problems: tuple[Problem, ...]
    array: ArraySpec | None
    job_name: str | None
    old_magic_lines: tuple[int, ...] = ()          # "#SLURM" directives
    hidden_separator_lines: tuple[int, ...] = ()   # "hetjob" inside a value or comment

    # The first component answers the per-node questions (Slurm's het-job leader); counts that
    # belong to the whole job (nodes, GPUs) add up over the components.
    @property
    def leader(self) -> SbatchComponent:
        return self.components[0]

    @property
    def nodes(self) -> int | None:
        """The job's nodes: a heterogeneous job's components are separate allocations (sbatch(1)
        HETEROGENEOUS JOB SUPPORT), so they add up; ``None`` if a component's count is not set."""
        counts = [c.nodes for c in self.components]
        return None if any(n is None for n in counts) else sum(counts)

    @property
    def gpus_per_node(self) -> int | None:
        return self.leader.gpus_per_node

    @property
    def total_gpus(self) -> int | None:
        """The job's GPUs: 0 for a CPU-only job, the sum over a heterogeneous job's components."""
        totals = [c.total_gpus for c in self.components]
        return None if any(t is None for t in totals) else sum(totals)

    @property
    def total_gpus_reason(self) -> str | None:
        asking = [c for c in self.components if c.gpu_sources] or self.components[:1]
        for c in asking:
            if c.total_gpus is None:
                return (f"component {c.index}: " if len(self.components) > 1 else "") + \
                    (c.total_gpus_reason or "unknown")
        return None

    @property
    def constraint(self) -> str | None:
        return self.leader.constraint

    @property
    def exclusive(self) -> bool:
        return self.leader.exclusive

    @property
    def time_limit_min(self) -> int | None:
        return self.leader.time_limit_min

    @property
    def partition(self) -> str | None:
        return self.leader.partition

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``courselib sbatch parse --json`` (``null`` where the script is silent)."""
        def comp(c: SbatchComponent) -> dict:
            return {
                "index": c.index, "nodes": c.nodes, "nodes_max": c.nodes_max,
                "ntasks": c.ntasks, "ntasks_per_node": c.ntasks_per_node,
                "gpus_per_node": c.gpus_per_node, "gpu_type": c.gpu_type,
                "total_gpus": c.total_gpus, "total_gpus_reason": c.total_gpus_reason,
                "gpu_sources": [{"option": g.option, "line": g.line, "per": g.per,
                                 "count": g.count, "type": g.gpu_type} for g in c.gpu_sources],
                "constraint": c.constraint, "exclusive": c.exclusive,
                "time_limit_min": c.time_limit_min,
                "time_limit_text": c.time_limit.text if c.time_limit else None,
                "partition": c.partition, "mem": c.mem, "first_line": c.first_line,
            }
        return {
            "file": self.file,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "total_gpus": self.total_gpus,
            "total_gpus_reason": self.total_gpus_reason,
            "constraint": self.constraint,
            "exclusive": self.exclusive,
            "time_limit_min": self.time_limit_min,
            "partition": self.partition,
            "array": None if self.array is None else {
                "text": self.array.text, "tasks": self.array.tasks,
                "max_running": self.array.max_running},
            "job_name": self.job_name,
            "components": [comp(c) for c in self.components],
            "ignored_directives": [{"line": ln, "text": t} for ln, t in self.ignored_directives],
            "unknown_options": [{"line": ln, "option": o} for ln, o in self.unknown_options],
            "stray_arguments": [{"line": ln, "word": w} for ln, w in self.stray_arguments],
            "problems": [{"line": p.line, "field": p.field, "message": p.message,
                          "hint": p.hint} for p in self.problems],
            "old_magic_lines": list(self.old_magic_lines),
            "hidden_separator_lines": list(self.hidden_separator_lines),
            "has_shebang": self.has_shebang,
            "first_command_line": self.first_command_line,
        }


# ----------------------------------------------------------------------------------------------
# tokenising a directive line (opt.c _get_argument)

def split_directive(rest: str) -> list[str]:
    """The words of the text after ``#SBATCH``, as sbatch's ``_get_argument`` reads them:
    whitespace separates, ``"`` and ``'`` group, ``\\`` escapes the next character (inside
    quotes too), an unescaped ``#`` outside quotes ends the line. An unmatched quote or a word
    starting with ``:`` is an error in sbatch (``InputError`` here, with the words read so far
    in ``err.words``)."""
    words, problem = directive_words(rest)
    if problem:
        err = InputError(problem, hint="close the quote, or escape the character with \\")
        err.words = words
        raise err
    return words


def directive_words(rest: str) -> tuple[list[str], str | None]:
    """:func:`split_directive` that does not raise: (the words read, the problem or None)."""
    words: list[str] = []
    cur: list[str] = []
    in_word = False
    quote: str | None = None
    escape = False
    for ch in rest:
        if escape:
            escape = False
            cur.append(ch)
            in_word = True
            continue
        if ch == "\\":
            escape = True
            in_word = True
            continue
        if quote:
            if ch == quote:
                quote = None
            else:
                cur.append(ch)
            continue
        if ch in "\"'":
            quote = ch
            in_word = True
        elif ch == "#":
            break
        elif ch.isspace():
            if in_word:
                words.append("".join(cur))
                cur, in_word = [], False
        else:
            if ch == ":" and not in_word:
                return words, "unexpected ':' at the start of a word (sbatch stops with an error)"
            cur.append(ch)
            in_word = True
    if quote:
        return words, f"unmatched {quote} (sbatch stops with an error)"
    if in_word:
        words.append("".join(cur))
    return words, None


# ----------------------------------------------------------------------------------------------
# values

# time_str2secs (src/common/parse_time.c) accepts, after _is_valid_timespec(): only ASCII digits,
# '-' and ':'; at most one '-' and two ':'; no '-' after a ':'; every ':'-field non-empty. A value
# with a '-' is read by sscanf("%d-%d:%d:%d") (days-[hours[:minutes[:seconds]]], so "1-" is a day),
# one without by "%d:%d:%d" (three fields: hours:minutes:seconds; else minutes[:seconds]).
_TIME_RE = {
    "M": re.compile(r"([0-9]+)"),
    "M:S": re.compile(r"([0-9]+):([0-9]+)"),
    "H:M:S": re.compile(r"([0-9]+):([0-9]+):([0-9]+)"),
    "D-": re.compile(r"([0-9]+)-"),
    "D-H": re.compile(r"([0-9]+)-([0-9]+)"),
    "D-H:M": re.compile(r"([0-9]+)-([0-9]+):([0-9]+)"),
    "D-H:M:S": re.compile(r"([0-9]+)-([0-9]+):([0-9]+):([0-9]+)"),
}
_TIME_UNITS = {"M": (60,), "M:S": (60, 1), "H:M:S": (3600, 60, 1), "D-": (86400,),
               "D-H": (86400, 3600), "D-H:M": (86400, 3600, 60), "D-H:M:S": (86400, 3600, 60, 1)}
_TIME_HINT = "write minutes (30), H:MM:SS (2:00:00) or D-HH:MM:SS (1-00:00:00); 0 or UNLIMITED for no limit"


def time_str2secs(text: str) -> tuple[int | None, str]:
    """Seconds and the form, as Slurm's ``time_str2secs`` reads a time (``None`` = INFINITE).

    ``"15"`` -> 900 (a bare number is minutes), ``"3:00"`` -> 180 (minutes:seconds),
    ``"1-"`` -> 86400 (a day), ``"-1"``/``"INFINITE"``/``"UNLIMITED"`` (any case) -> ``None``.
    What Slurm refuses (``NO_VAL``: ``"60:"``, ``" 0:0:0 "``, ``"2h"``) is an :class:`InputError`.
    Source: SchedMD/slurm ``src/common/parse_time.c`` ``time_str2secs()`` and
    ``_is_valid_timespec()``; the cases of ``testsuite/slurm_unit/common/parse_time-test.c``
    are in ``tests/upstream/``. Slurm does not trim spaces, and neither does this.
    """
    if not isinstance(text, str) or not text:
        raise InputError(f"{text!r} is not a Slurm time", hint=_TIME_HINT)
    if text.upper() in ("-1", "INFINITE", "UNLIMITED"):
        return None, "UNLIMITED"
    if re.fullmatch(r"-[0-9]+", text):
        # _is_valid_timespec lets it through and sscanf reads a negative day count: Slurm stores
        # a negative limit; refusing it is the one deliberate difference (tests/upstream)
        raise InputError(f"{text!r} is a negative time (Slurm would store a negative limit)",
                         hint=_TIME_HINT)
    for form, rx in _TIME_RE.items():
        m = rx.fullmatch(text)
        if m:
            return sum(int(g) * u for g, u in zip(m.groups(), _TIME_UNITS[form])), form
    raise InputError(f"{text!r} is not a Slurm time limit", hint=_TIME_HINT)


def parse_time(text: str) -> TimeLimit:
    """Slurm's ``--time``: whole minutes (seconds round up), ``None`` for no limit.

    ``"15"`` -> 15 (minutes), ``"3:00"`` -> 3 (minutes:seconds), ``"1-0"`` -> 1440 (a day),
    ``"0:10:00"`` -> 10, ``"UNLIMITED"`` -> ``None``, and ``"0"`` (or ``"0:0:0"``) -> ``None``:
    sbatch(1) "A time limit of zero requests that no time limit be imposed" — ``time_str2mins``
    rounds the seconds up, then ``arg_set_time_limit()`` (``src/common/slurm_opt.c``) turns 0
    into ``INFINITE``.
    """
    secs, form = time_str2secs(text)
    if secs is None:
        return TimeLimit(text, None, form)
    minutes = (secs + 59) // 60      # time_str2mins: ROUNDUP(secs, 60)
    return TimeLimit(text, minutes or None, form)


def _count(text: str, what: str) -> int:
    t = text.strip()
    m = re.fullmatch(r"(\d+)([kKmM]?)", t)
    if not m:
        shown = text if len(text) <= 40 else f"{text[:12]}...({len(text)} characters)"
        raise InputError(f"{shown!r} is not a whole number", hint=f"give {what} as a number, e.g. 2")
    if len(m.group(1)) > 18:  # Slurm reads counts as 32- or 64-bit integers
        raise InputError(f"a {len(m.group(1))}-digit number is too large for {what}",
                         hint=f"give {what} as a number, e.g. 2")
    n = int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 ** 2}[m.group(2).lower()]
    return n


_MEM_RE = re.compile(r"(\d{1,18})([KMGTkmgt]?)")


def parse_mem(text: str) -> str:
    """``--mem=64G``: a whole number with an optional unit K, M (the default), G or T (sbatch(1));
    returned as written. ``10Gx`` or ``1.5G`` is refused, as sbatch refuses it ("invalid --mem")."""
    t = text.strip()
    if not _MEM_RE.fullmatch(t):
        shown = t if len(t) <= 40 else f"{t[:12]}...({len(t)} characters)"
        raise InputError(f"{shown!r} is not a memory size sbatch reads",
                         hint="write a whole number with K, M, G or T, e.g. --mem=64G (no unit: megabytes)")
    return t


def parse_nodes(text: str) -> tuple[int, int | None]:
    """``-N 2`` -> (2, None); ``-N 2-4`` -> (2, 4): a minimum and an optional maximum."""
    t = text.strip()
    if "-" in t:
        lo, _, hi = t.partition("-")
        a, b = _count(lo, "the node count"), _count(hi, "the node count")
        if b < a:
            raise InputError(f"{text!r}: the maximum node count is below the minimum")
        return a, b
    if "," in t or ":" in t:  # --nodes=1,3,5 (list of allowed sizes) -> the smallest
        sizes = [_count(s, "the node count") for s in re.split(r"[,:]", t) if s]
        if not sizes:
            raise InputError(f"{text!r} is not a node count")
        return min(sizes), max(sizes)
    return _count(t, "the node count"), None


def parse_typed_count(text: str, what: str) -> tuple[str | None, int]:
    """``--gpus-per-node=8`` -> (None, 8); ``=volta:3`` -> ("volta", 3)."""
    t = text.strip()
    if ":" in t:
        typ, _, n = t.rpartition(":")
        return typ or None, _count(n, what)
    return None, _count(t, what)


def parse_gres(text: str) -> list[tuple[str, str | None, int]]:
    """``--gres=gpu:a100:4,nvme:200`` -> [("gpu", "a100", 4), ("nvme", None, 200)].

    Each item is ``name[[:type]:count]``; a missing count is 1 (``--gres=gpu`` is one GPU).
    ``none`` clears the request.
    """
    out = []
    t = text.strip()
    if t.lower() == "none":
        return out
    for item in t.split(","):
        item = re.sub(r"\(.*?\)$", "", item.strip())  # gpu:2(S:0-1) socket hints
        if not item:
            raise InputError(f"{text!r} has an empty item", hint="write --gres=gpu:4")
        parts = item.split(":")
        name = parts[0]
        if not name:
            raise InputError(f"{text!r}: a GRES item has no name", hint="write --gres=gpu:4")
        if len(parts) == 1:
            out.append((name, None, 1))
        elif len(parts) == 2:
            if re.fullmatch(r"\d+[kKmM]?", parts[1]):
                out.append((name, None, _count(parts[1], "the GRES count")))
            elif re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?[kKmMgGtT]?", parts[1]):
                # a number that is not a whole count (gpu:-1, gpu:1.5): sbatch refuses it
                # ("Invalid generic resource (gres) specification"); it is not a type name
                raise InputError(f"{text!r}: {parts[1]!r} is not a whole number of {name}s",
                                 hint=f"write --gres={name}:N with N a whole number, e.g. {name}:4")
            else:
                out.append((name, parts[1], 1))
        else:
            out.append((name, ":".join(parts[1:-1]), _count(parts[-1], "the GRES count")))
    return out


def parse_array(text: str) -> ArraySpec:
    """``1-10%1`` -> 10 tasks, at most 1 running; ``0-15:4`` -> 4 tasks; ``1,3,5`` -> 3."""
    t = text.strip()
    body, pct, limit = t.partition("%")
    max_running = _count(limit, "the array throttle") if pct else None
    indices: set[int] = set()
    count = 0
    for item in body.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", item.strip())
        if not m:
            raise InputError(f"{text!r} is not a job array", hint="write --array=1-10 or 1,3,5 or 0-15:4%2")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi < lo or step < 1 or hi - lo > 10_000_000:
            raise InputError(f"{text!r}: bad range {item.strip()!r}")
        r = range(lo, hi + 1, step)
        count += len(r)
        if count <= 100_000:
            indices.update(r)
    return ArraySpec(t, len(indices) if count <= 100_000 else count, max_running)


# ----------------------------------------------------------------------------------------------
# option lookup (getopt_long: exact match, else a unique prefix)

def _long_name(name: str) -> str | None:
    if name in LONG_OPTIONS:
        return ALIASES.get(name, name)
    matches = [o for o in LONG_OPTIONS if o.startswith(name)]
    if len(matches) == 1 and name:
        return ALIASES.get(matches[0], matches[0])
    return None


def _parse_words(words: list[str], line: int, comp: int, out: list[Directive],
                 unknown: list, stray: list) -> None:
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and len(w) > 2:
            name, eq, value = w[2:].partition("=")
            canon = _long_name(name)
            if canon is None:
                unknown.append((line, "--" + name))
                out.append(Directive(line, name, value if eq else None, w, comp, known=False))
                i += 1
                continue
            kind = LONG_OPTIONS.get(canon, LONG_OPTIONS.get(name, "req"))
            if kind == "req" and not eq:
                if i + 1 < len(words):
                    value = words[i + 1]
                    out.append(Directive(line, canon, value, f"{w} {value}", comp))
                    i += 2
                    continue
                out.append(Directive(line, canon, None, w, comp))
                i += 1
                continue
            if kind == "none" and eq:
                out.append(Directive(line, canon, value, w, comp))
            else:
                out.append(Directive(line, canon, value if eq else None, w, comp))
            i += 1
        elif w.startswith("-") and len(w) > 1 and w != "--":
            j = 1
            while j < len(w):
                ch = w[j]
                canon = SHORT_OPTIONS.get(ch)
                if canon is None:
                    unknown.append((line, "-" + ch))
                    out.append(Directive(line, "-" + ch, None, w, comp, known=False))
                    j += 1
                    continue
                kind = LONG_OPTIONS[canon]
                if kind == "req":
                    rest = w[j + 1:]
                    if rest:
                        out.append(Directive(line, canon, rest.lstrip("="), w, comp))
                    elif i + 1 < len(words):
                        i += 1
                        out.append(Directive(line, canon, words[i], f"{w} {words[i]}", comp))
                    else:
                        out.append(Directive(line, canon, None, w, comp))
                    break
                out.append(Directive(line, canon, None, w, comp))
                j += 1
            i += 1
        else:
            stray.append((line, w))
            i += 1


# ----------------------------------------------------------------------------------------------

def _refuse_without_shebang(text: str, lines: list[str], file: str | None) -> None:
    """sbatch's own test (src/sbatch/sbatch.c, has_shebang and its caller, L562-573 and L684-694 on
    SchedMD/slurm branch slurm-26.05 @531c4b2e): an empty or blank script, or one whose first two bytes
    are not ``#!``, is refused before any ``#SBATCH`` line is read."""
    if not text.strip():
        raise InputError("the script is empty: sbatch refuses it (\"Batch script is empty!\")", file=file, line=1,
                         hint="write the script: '#!/bin/bash' on line 1, then the #SBATCH lines and commands")
    later = next((n for n, raw in enumerate(lines, start=1) if raw.startswith("#!")), None)
    first = lines[0].strip()
    found = (f"'#!' is on line {later}" if later else f"line 1 is {first[:30]!r}" if first else "line 1 is blank")
    raise InputError(f"sbatch refuses this script: its first line must start with '#!' ({found}; sbatch: "
                     f"\"This does not look like a batch script\")", file=file, line=1,
                     hint="put '#!/bin/bash' on line 1, above every comment and #SBATCH line")


def parse_sbatch(text: str, *, file: str | None = None, strict: bool = True) -> SbatchReading:
    """Read an sbatch script's text into an :class:`SbatchReading` (see the module docstring)."""
    if not isinstance(text, str):
        raise InputError("expected the text of an sbatch script", file=file)
    if "\x00" in text:
        raise InputError("this is a binary file, not an sbatch script", file=file, line=1)
    lines = text.splitlines()
    has_shebang = text.startswith("#!")
    if strict and not has_shebang:
        _refuse_without_shebang(text, lines, file)
    shebang_line = None
    directives: list[Directive] = []
    unknown: list[tuple[int, str]] = []
    stray: list[tuple[int, str]] = []
    ignored: list[tuple[int, str]] = []
    first_command: int | None = None
    comp = 0
    comp_starts = {0: None}
    old_magic: list[int] = []
    split_problems: list[tuple[int, str]] = []
    hidden_separators: list[int] = []
    for n, raw in enumerate(lines, start=1):
        if first_command is None:
            if raw.startswith("#!") and shebang_line is None:
                shebang_line = n
            magic = MAGIC if raw.startswith(MAGIC) else OLD_MAGIC if raw.startswith(OLD_MAGIC) else None
            if magic:
                if magic == OLD_MAGIC:
                    old_magic.append(n)
                words, problem = directive_words(raw[len(magic):])
                if problem:
                    split_problems.append((n, problem))
                # sbatch looks for the separator anywhere in the line (strcasestr), so
                # "--job-name=hetjob-test" or a comment naming it starts a component too
                low = raw.lower()
                if "hetjob" in low or "packjob" in low:
                    comp += 1
                    check_count("components", comp + 1, file=file, line=n, field="hetjob")
                    comp_starts[comp] = n
                    if not any(w.lower() in ("hetjob", "packjob") for w in words):
                        hidden_separators.append(n)
                    words = [w for w in words if w.lower() not in ("hetjob", "packjob")]
                before = len(directives)
                _parse_words(words, n, comp, directives, unknown, stray)
                if comp_starts[comp] is None and len(directives) > before:
                    comp_starts[comp] = n
                continue
            stripped = raw.strip()
            if stripped and not stripped.startswith("#"):
                first_command = n
            continue
        if raw.startswith((MAGIC, OLD_MAGIC)):
            ignored.append((n, raw.rstrip()))
    problems: list[Problem] = []

    def fail(line: int, fld: str, err: CourseError) -> None:
        if strict:
            raise InputError(err.message, file=file, line=line, field=fld, hint=err.hint)
        problems.append(Problem(line, fld, err.message, err.hint))

    for line, problem in split_problems:
        fail(line, "#SBATCH", InputError(problem, hint="close the quote, or escape the character with \\"))

    comps = []
    carried: dict[str, tuple[str | None, int]] = {}
    array = None
    job_name = None
    by_component: dict[int, list[Directive]] = {}
    for d in directives:
        if d.known:
            by_component.setdefault(d.component, []).append(d)
    for ci in range(comp + 1):
        own = by_component.get(ci, [])
        opts: list[tuple[str, str | None, int]] = []
        own_names = {d.option for d in own}
        for name, (value, line) in carried.items():
            if name not in own_names:
                opts.append((name, value, line))
        opts += [(d.option, d.value, d.line) for d in own]
        for d in own:
            if d.option in PROPAGATING:
                carried[d.option] = (d.value, d.line)
            if LONG_OPTIONS.get(d.option) == "req" and d.value is None:
                fail(d.line, "--" + d.option, InputError("needs a value",
                     hint=f"write --{d.option}=VALUE"))
        comps.append(_component(ci, opts, comp_starts.get(ci) or 0, fail))
        if ci == 0:
            a = _last(opts, "array")
            if a and a[0] is not None:
                try:
                    array = parse_array(a[0])
                except CourseError as err:
                    fail(a[1], "--array", err)
            jn = _last(opts, "job-name")
            job_name = jn[0] if jn else None
    return SbatchReading(
        file=file, has_shebang=has_shebang,
        shebang_line=shebang_line if shebang_line and shebang_line != 1 else None,
        first_command_line=first_command, components=tuple(comps),
        directives=tuple(directives), ignored_directives=tuple(ignored),
        unknown_options=tuple(unknown), stray_arguments=tuple(stray),
        problems=tuple(problems), array=array, job_name=job_name,
        old_magic_lines=tuple(old_magic), hidden_separator_lines=tuple(hidden_separators))


def _last(opts, name):
    for opt, value, line in reversed(opts):
        if opt == name:
            return value, line
    return None


def _component(index: int, opts, first_line: int, fail) -> SbatchComponent:
    def get(name, conv, fld=None):
        hit = _last(opts, name)
        if hit is None or hit[0] is None:
            return None, None
        try:
            return conv(hit[0]), hit[1]
        except CourseError as err:
            fail(hit[1], fld or "--" + name, err)
            return None, hit[1]

    nodes_pair, _ = get("nodes", parse_nodes)
    nodes, nodes_max = nodes_pair if nodes_pair else (None, None)
    ntasks, _ = get("ntasks", lambda v: _count(v, "the task count"))
    tpn, _ = get("ntasks-per-node", lambda v: _count(v, "tasks per node"))
    time_limit, _ = get("time", parse_time)
    constraint_hit = _last(opts, "constraint")
    constraint = constraint_hit[0] if constraint_hit else None
    part_hit = _last(opts, "partition")
    partition = part_hit[0] if part_hit else None
    mem, _ = get("mem", parse_mem)
    exclusive = _last(opts, "exclusive") is not None
    if _last(opts, "oversubscribe") is not None:
        # the later of --exclusive / --oversubscribe wins
        ex_line = max((ln for o, _, ln in opts if o == "exclusive"), default=-1)
        ov_line = max((ln for o, _, ln in opts if o == "oversubscribe"), default=-1)
        exclusive = ex_line > ov_line

    sources: list[GpuSource] = []
    gpn_opt, line = get("gpus-per-node", lambda v: parse_typed_count(v, "GPUs per node"))
    if gpn_opt:
        sources.append(GpuSource("--gpus-per-node", line, "node", gpn_opt[1], gpn_opt[0]))
    gres, line = get("gres", parse_gres)
    if gres:
        gpu_items = [g for g in gres if g[0] == "gpu"]
        if gpu_items:
            sources.append(GpuSource("--gres", line, "node", sum(g[2] for g in gpu_items),
                                     gpu_items[0][1]))
    gpt, line = get("gpus-per-task", lambda v: parse_typed_count(v, "GPUs per task"))
    if gpt:
        sources.append(GpuSource("--gpus-per-task", line, "task", gpt[1], gpt[0]))
    gpus, line = get("gpus", lambda v: parse_typed_count(v, "GPUs"))
    if gpus:
        sources.append(GpuSource("--gpus", line, "job", gpus[1], gpus[0]))

    # tasks per node, where the script fixes it
    if tpn is None and ntasks is not None and nodes is not None and nodes_max is None \
            and nodes > 0 and ntasks % nodes == 0:
        tasks_per_node = ntasks // nodes
    else:
        tasks_per_node = tpn

    gpn: int | None = None
    gpu_type = None
    reason = None
    for s in sources:      # per-node requests are the direct answer
        if s.per == "node":
            gpn, gpu_type = s.count, s.gpu_type
            break
    if gpn is None:
        for s in sources:
            if s.per == "task":
                if tasks_per_node is not None:
                    gpn, gpu_type = s.count * tasks_per_node, s.gpu_type
                else:
                    reason = "--gpus-per-task is set but the tasks per node are not fixed"
            elif s.per == "job":
                gpu_type = gpu_type or s.gpu_type
                if nodes is not None and nodes_max is None and nodes > 0 and s.count % nodes == 0:
                    gpn = s.count // nodes
                elif nodes is None:
                    reason = "--gpus is a job total and the node count is not set"
            if gpn is not None:
                break

    total: int | None = None
    job_total = next((s for s in sources if s.per == "job"), None)
    if not sources:        # a CPU-only job: it asks for no GPUs, so it holds none
        reason = None
        total = 0
    elif job_total is not None:
        total = job_total.count
        reason = None
    elif gpn is not None and nodes is not None:
        total = gpn * nodes
        reason = None
        if nodes_max is not None:
            reason = f"between {gpn * nodes} and {gpn * nodes_max} (--nodes={nodes}-{nodes_max})"
    elif gpn is not None and nodes is None:
        if ntasks is not None:
            reason = (f"--nodes is not set: with --ntasks={ntasks} Slurm picks as many nodes as "
                      f"the tasks need (depends on the nodes' cores); {gpn} GPUs x N nodes")
        elif tasks_per_node is not None and gpt is not None:
            reason = (f"--nodes is not set: Slurm's default of 1 node would give {gpn}")
        else:
            reason = (f"--nodes is not set (given at submission?); Slurm's default of 1 node "
                      f"would give {gpn}")
    elif reason is None:
        reason = "the GPU count per node cannot be worked out from the script"

    return SbatchComponent(
        index=index, nodes=nodes, nodes_max=nodes_max, ntasks=ntasks, ntasks_per_node=tpn,
        gpus_per_node=gpn, gpu_type=gpu_type, total_gpus=total, total_gpus_reason=reason,
        gpu_sources=tuple(sources), constraint=constraint, exclusive=exclusive,
        time_limit=time_limit, partition=partition, mem=mem, first_line=first_line,
        options=tuple(opts))


def read_sbatch(path, *, strict: bool = True) -> SbatchReading:
    """Read the sbatch script at ``path`` (never written to)."""
    return parse_sbatch(read_text(path, "sbatch"), file=str(path), strict=strict)


def constraint_features(expr: str | None) -> tuple[str, ...]:
    """The node features a ``--constraint`` expression names: ``"[rack1|rack2]&nvlink"`` ->
    ``("rack1", "rack2", "nvlink")`` (counts such as ``*2`` dropped)."""
    if not expr:
        return ()
    names = []
    for tok in re.split(r"[&|,\[\]()]", expr):
        tok = re.sub(r"\*\d+$", "", tok.strip())
        if tok and tok not in names:
            names.append(tok)
    return tuple(names)


def has_placeholder(value: str | None) -> bool:
    """``<partition>`` or ``$PARTITION``: a value someone forgot to fill in."""
    return bool(value) and bool(_PLACEHOLDER.search(value))


# ----------------------------------------------------------------------------------------------
# to the gang scheduler's model

def to_job(reading: SbatchReading, *, duration: float | None = None, submit: float = 0.0,
           name: str | None = None, priority: int = 0, component: int = 0):
    """The script as a ``courselib.model.workload.Job`` for the mini gang scheduler.

    One pod per node (``-N 64 --gpus-per-node=8`` -> 64 pods x 8 GPUs), so that Slurm's
    whole-job allocation is a gang of ``nodes`` members; ``--constraint``, ``--exclusive`` and
    ``--time`` (as ``time_limit`` in seconds) carry over. ``duration`` is how long the job really
    trains; without it the job is assumed to run to its time limit.
    """
    where = dict(file=reading.file, line=None)
    if not 0 <= component < len(reading.components):
        raise InputError(f"the script has {len(reading.components)} component(s), not {component + 1}",
                         **where)
    c = reading.components[component]
    if c.nodes is None:
        raise InputError("the node count is not in the script", field="--nodes",
                         hint="add '#SBATCH --nodes=N' (or pass the count when you convert)",
                         file=reading.file, line=c.first_line or None)
    gpus_per_node = 0 if not c.gpu_sources else c.gpus_per_node    # a CPU-only job
    if gpus_per_node is None:
        raise InputError(f"GPUs per node unknown: {c.total_gpus_reason}", field="--gpus-per-node",
                         file=reading.file, line=c.first_line or None,
                         hint="add '#SBATCH --gpus-per-node=G'")
    limit = c.time_limit_min * 60.0 if c.time_limit_min is not None else None
    if duration is None:
        if limit is None:
            said = (f"--time={c.time_limit.text} means no time limit" if c.time_limit
                    else "the script has no --time either")
            raise InputError(f"give a duration: {said}", field="--time",
                             file=reading.file, line=c.line_of("time") or c.first_line or None)
        duration = limit
    job_name = name or reading.job_name or (Path(reading.file).stem if reading.file else "sbatch-job")
    return Job(name=job_name, pods=c.nodes, gpus_per_pod=gpus_per_node, submit=submit,
               duration=duration, priority=priority, constraint=c.constraint,
               exclusive=c.exclusive, time_limit=limit,
               queue=c.partition or "default")

"""Feature labels on numbered nodes, as ``--features`` writes them, for every real cluster courselib runs.

A local Slurm (``courselib slurm up``) and a local Kubernetes control plane (``courselib kube up``)
both build ``nodes`` numbered nodes (``node1`` upwards) and put feature labels on some of them:
``nvlink:2`` is "nvlink on node1 and node2". A feature's *where* is ``None`` (every node), a count
``k`` (node1..nodek) or a tuple of 1-based node numbers; these functions read, check, apply and
describe that one notation, and find a free loopback port.
"""
from __future__ import annotations

import re
import socket

from courselib.errors import InputError


def parse_features(text: str | None) -> tuple[tuple[str, int | None], ...]:
    """``"nvlink:2,ib"`` -> ``(("nvlink", 2), ("ib", None))``: nvlink on node1-2, ib on all."""
    if not text:
        return ()
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, count = item.partition(":")
        if count:
            if not count.isdigit():
                raise InputError(f"{item!r}: the count after ':' must be a number of nodes",
                                 field="--features", hint="e.g. --features nvlink:2,ib")
            out.append((name, int(count)))
        else:
            out.append((name, None))
    return tuple(out)


def check_features(features, nodes: int, name_pattern: str, what: str) -> tuple:
    """``features`` normalised (node tuples sorted), or a one-line error naming ``--features``."""
    norm = []
    for name, where in features:
        if not re.fullmatch(name_pattern, name):
            raise InputError(f"{name!r} is not {what}", field="--features")
        if isinstance(where, (list, tuple)):
            where = tuple(sorted(set(int(k) for k in where)))
            if not where or not all(1 <= k <= nodes for k in where):
                raise InputError(f"{name}: node numbers must be 1 to {nodes}", field="--features")
        elif where is not None and not 1 <= where <= nodes:
            raise InputError(f"{name}:{where}: a feature can be on 1 to {nodes} nodes",
                             field="--features")
        norm.append((name, where))
    return tuple(norm)


def features_of(features, k: int) -> tuple[str, ...]:
    """The features of node ``k`` (1-based)."""
    return tuple(name for name, where in features
                 if where is None or (k in where if isinstance(where, tuple) else k <= where))


def describe_where(where) -> str:
    if where is None:
        return "all nodes"
    if isinstance(where, tuple):
        return "node" + ",".join(map(str, where)) if len(where) == 1 else "nodes " + ",".join(map(str, where))
    return f"{where} node{'s' if where != 1 else ''}"


def cli_features(features) -> str | None:
    """The ``--features`` text for ``features`` (``None`` where a node list cannot be written so)."""
    if any(isinstance(w, tuple) for _, w in features):
        return None
    return ",".join(n if w is None else f"{n}:{w}" for n, w in features)


def features_json(features) -> list:
    return [[n, list(w) if isinstance(w, tuple) else w] for n, w in features]


def features_from_json(items) -> tuple:
    return tuple((n, tuple(w) if isinstance(w, list) else w) for n, w in items)


def port_free(port: int) -> bool:
    """Can this process listen on 127.0.0.1:``port`` now?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True

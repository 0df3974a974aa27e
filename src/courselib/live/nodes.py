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


def features_for(spec) -> tuple:
    """The ``features`` of a local cluster that emulates the model's ``spec`` (a
    :class:`~courselib.model.workload.ClusterSpec`): each feature on every node (``None``), on
    node1..nodek (``k``) or on the listed nodes (a tuple of 1-based numbers)."""
    by_feature: dict[str, list[int]] = {}
    for node in spec.node_list():
        for f in sorted(node.features):
            by_feature.setdefault(f, []).append(node.index + 1)
    feats = []
    for name, ks in sorted(by_feature.items()):
        if len(ks) == spec.nodes:
            feats.append((name, None))
        elif ks == list(range(1, len(ks) + 1)):
            feats.append((name, len(ks)))
        else:
            feats.append((name, tuple(ks)))
    return tuple(feats)


class NodesShape:
    """What every local cluster's shape shares (a mixin for a frozen dataclass with ``nodes``,
    ``gpus_per_node``, ``features``, ``cpus_per_node`` and ``base_port``): its checks, each node's
    features, and how it is described, written as ``up`` arguments and saved."""
    nodes: int
    gpus_per_node: int
    features: tuple
    cpus_per_node: int
    base_port: int

    def check_nodes(self, *, max_nodes: int, node_hint: str, ports: int, name_pattern: str,
                    what: str) -> None:
        """One-line errors naming ``--nodes``, ``--gpus-per-node``, ``--port`` (the cluster uses
        ``ports`` ports from ``base_port``) or ``--features``; the features normalised."""
        if not 1 <= self.nodes <= max_nodes:
            raise InputError(f"{self.nodes} nodes: choose 1 to {max_nodes}", field="--nodes", hint=node_hint)
        if not 0 <= self.gpus_per_node <= 64:
            raise InputError(f"{self.gpus_per_node} GPUs per node: choose 0 to 64",
                             field="--gpus-per-node")
        if not 1024 <= self.base_port <= 65535 - ports:
            raise InputError(f"port {self.base_port}: choose 1024 to {65535 - ports}", field="--port")
        object.__setattr__(self, "features", check_features(self.features, self.nodes, name_pattern, what))

    def features_of(self, k: int) -> tuple[str, ...]:
        """The features of node ``k`` (1-based)."""
        return features_of(self.features, k)

    def describe_nodes(self) -> str:
        """``4 nodes x 8 GPUs (nvlink on 2 nodes)``."""
        feats = ", ".join(f"{n} on {describe_where(w)}" for n, w in self.features)
        return (f"{self.nodes} node{'s' if self.nodes != 1 else ''} x {self.gpus_per_node} GPUs"
                + (f" ({feats})" if feats else ""))

    def nodes_args(self) -> str:
        """``--nodes 4 --gpus-per-node 8 --features nvlink:2`` (features where expressible)."""
        out = f"--nodes {self.nodes} --gpus-per-node {self.gpus_per_node}"
        if self.features and cli_features(self.features):
            out += " --features " + cli_features(self.features)
        return out

    def same_features(self, other: "NodesShape") -> bool:
        """The same nodes and GPUs, each node with the same features (however they are written)."""
        return (self.nodes, self.gpus_per_node) == (other.nodes, other.gpus_per_node) and all(
            set(self.features_of(k)) == set(other.features_of(k)) for k in range(1, self.nodes + 1))

    def port_arg(self, default: int) -> str:
        """`` --port P`` where the shape's ports are not the default ones."""
        return f" --port {self.base_port}" if self.base_port != default else ""

    def nodes_json(self) -> dict:
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
                "features": features_json(self.features), "cpus_per_node": self.cpus_per_node,
                "base_port": self.base_port}

    @staticmethod
    def nodes_from_json(d: dict, default_port: int) -> dict:
        """The keyword arguments :meth:`nodes_json` wrote (the shape's constructor takes them)."""
        return {"nodes": d["nodes"], "gpus_per_node": d["gpus_per_node"],
                "features": features_from_json(d.get("features", [])),
                "cpus_per_node": d.get("cpus_per_node", 64), "base_port": d.get("base_port", default_port)}

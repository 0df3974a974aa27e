"""Shared by the Kubernetes suites: an upstream test pod (as YAML data) -> courselib's Pod."""
from __future__ import annotations

from dataclasses import replace

import yaml

from courselib.io.pod import read_pods_text
from courselib.model.qos import rules

GATES = {"PodLevelResources": "pod_level_resources",
         "PodLevelResourcesFixKubeletQOSClass": "pod_level_qos_fix"}


def pod_of(name: str, spec: dict):
    """Read the pod through courselib's own manifest reader (quantities such as ``100Mi``, ``5m``)."""
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    (reading,) = read_pods_text(text, file=f"{name}.yaml")
    return reading.pod


def rules_for(gates: dict):
    """v1.37.2's rules with the feature gates the upstream case sets (courselib models these)."""
    r = rules("1.37.2")
    return replace(r, **{GATES[k]: v for k, v in gates.items() if k in GATES})

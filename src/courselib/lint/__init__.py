"""Lint rules as a registry: one small function per rule code, with its reason and its fix.

``courselib lint FILE`` reads a file with its reader (``courselib.io``: readers only) and runs the
rules of its kind here: ``sbatch.py`` (S0xx), ``manifests.py`` (K0xx), ``dockerfile.py`` (D0xx),
``workload.py`` (W0xx: topology requests in a workload file).
``courselib lint --explain CODE`` prints a rule's reason and fix (:func:`explain`). A finding is
a value (:class:`courselib.model.lint.Finding`): the CLI sorts and prints them, tests compare them.
"""
from __future__ import annotations

from courselib.lint.dockerfile import lint_dockerfile
from courselib.lint.manifests import lint_manifests
from courselib.lint.registry import RULES, Rule, explain, rule, rules_for
from courselib.lint.sbatch import lint_sbatch
from courselib.lint.workload import lint_workload

__all__ = ["RULES", "Rule", "explain", "lint_dockerfile", "lint_manifests", "lint_sbatch", "lint_workload",
           "rule", "rules_for"]

"""The few calls courselib makes to the local API server, through the Kubernetes Python client.

:class:`Api` uses the client's ``ApiClient`` — its TLS, its token handling, its connection pool — with
JSON bodies in and out: no model classes to build or parse, which keeps a thousand pods cheap and lets
a manifest go to the server exactly as written (``kube validate``). Errors keep the server's
``Status`` object (:class:`ApiError`), whose ``details.causes`` name the field.

The replay driver (:mod:`courselib.live.kube.replay`) asks its client for a few things beside the
API — the scheduler's metrics, the daemons that stopped, a watch on its pods — so that a unit test
can hand it a fake with the same methods and drive its settle and clock logic in milliseconds
(as httpx's injected transport lets its users test what sits above it).
"""
from __future__ import annotations

import json

from courselib.errors import CourseError
from courselib.live.kube.cluster import NAMESPACE, ControlPlane, scheduler_metrics
from courselib.live.kube.watch import PodWatch


class ApiError(CourseError):
    """The API server answered with an error status (its ``Status`` object is kept)."""

    def __init__(self, status: int, body: dict | None, what: str):
        self.status, self.body = status, body or {}
        super().__init__(f"{what}: {status} {self.body.get('reason', '')}: "
                         f"{self.body.get('message', '')}".rstrip(": "))


class Api:
    """The calls a replay makes, through the Kubernetes Python client's ApiClient (its TLS and
    token handling), with JSON bodies in and out: no model classes to build or parse, which keeps
    a thousand pods cheap."""

    def __init__(self, cp: ControlPlane):
        from kubernetes import client
        self.client = cp.api()
        self.core = client.CoreV1Api(self.client)
        self.cp = cp

    def raw(self, method: str, path: str, body=None, query=None, *, timeout: float = 30,
            content_type: str = "application/json", stream: bool = False):
        params = self.client.param_serialize(
            method, path, query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body, auth_settings=["BearerToken"])
        resp = self.client.call_api(params[0], params[1], header_params=params[2], body=params[3],
                                    _request_timeout=timeout)
        if stream:
            return resp
        resp.read()
        data = json.loads(resp.data) if resp.data else None
        if resp.status >= 400:
            raise ApiError(resp.status, data if isinstance(data, dict) else None, f"{method} {path}")
        return data

    def list_pods(self, selector: str | None = None) -> dict:
        q = {"labelSelector": selector} if selector else {}
        return self.raw("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", query=q)

    def create(self, path: str, body: dict, *, dry_run: bool = False, ok_exists: bool = False):
        q = {"dryRun": "All", "fieldValidation": "Strict"} if dry_run else {}
        try:
            return self.raw("POST", path, body, q)
        except ApiError as err:
            if ok_exists and err.status == 409:
                return None
            raise

    def patch_status(self, name: str, status: dict) -> None:
        try:
            self.raw("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/status",
                     {"status": status}, content_type="application/strategic-merge-patch+json")
        except ApiError as err:
            if err.status != 404:  # deleted meanwhile (preempted): nothing to report
                raise

    def delete(self, path: str, query=None) -> None:
        try:
            self.raw("DELETE", path, query=query)
        except ApiError as err:
            if err.status != 404:
                raise

    # ---- what the replay driver asks beside the API (a test's fake has the same) -------------
    def scheduler_metrics(self) -> str:
        """kube-scheduler's Prometheus metrics text."""
        return scheduler_metrics(self.cp)

    def stopped(self) -> list[str]:
        """The roles of the control plane's daemons that are no longer running."""
        return [p.role for p in self.cp.procs if not p.is_ours()]

    def log_tail(self, role: str) -> str:
        return self.cp.log_tail(role)

    def log_hint(self) -> str:
        return self.cp.log_hint()

    def watch(self, selector: str, path: str | None = None):
        """A watch (not yet started) on the objects at ``path`` (default: the replay namespace's
        pods) carrying ``selector``."""
        return PodWatch(self, selector, path)


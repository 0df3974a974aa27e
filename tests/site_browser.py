"""A small driver for Debian's headless Chromium over the DevTools protocol, for the website tests.

No browser is downloaded and no Python package is added: Chromium speaks the protocol over a pair of
pipes (``--remote-debugging-pipe``: it reads NUL-separated JSON commands on fd 3 and writes replies
and events on fd 4), and this module is the ~150 lines of stdlib needed to drive one tab.

Requests leaving 127.0.0.1 are intercepted: the MathJax CDN URL is answered from a local copy of the
same MathJax 3 (when one is given), every other outside request is refused at once and recorded, so a
page behaves here as it would for a reader whose network is slow — never by waiting on a time-out.
"""
from __future__ import annotations

import base64
import itertools
import json
import mimetypes
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

MATHJAX_CDN = "https://cdn.jsdelivr.net/npm/mathjax@3/"


def chromium_binary() -> str | None:
    """Debian's ``chromium``; on a CI runner image, the Chromium or Chrome it ships."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


class ProtocolError(RuntimeError):
    pass


class Chromium:
    """One headless Chromium with one tab; ``with Chromium(mathjax_dir=...) as tab: tab.goto(url)``."""

    def __init__(self, binary: str | None = None, mathjax_dir: Path | None = None, local_prefix: str = ""):
        self.binary = binary or chromium_binary()
        if self.binary is None:
            raise FileNotFoundError("chromium")
        self.mathjax_dir = Path(mathjax_dir) if mathjax_dir else None
        self.local_prefix = local_prefix
        self.blocked: list[str] = []          # outside URLs the pages asked for (refused)
        self.served_locally: list[str] = []   # CDN URLs answered from the local MathJax
        self.events: list[dict] = []          # console errors, exceptions, failed loads of this page
        self._ids = itertools.count(1)
        self._pending: dict[int, queue.Queue] = {}
        self._waiters: list[tuple[str, queue.Queue]] = []
        self._lock = threading.Lock()
        self.session = None

    # ---- process and pipe ----------------------------------------------------------------------
    def __enter__(self):
        self._profile = tempfile.mkdtemp(prefix="course-chromium-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Chromium wants the pipe on fds 3 and 4 exactly; the shell puts them there, then execs it.
        hi_r = _high_fd(to_browser_r)
        hi_w = _high_fd(from_browser_w)
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
                "--disable-features=Translate,MediaRouter,OptimizationHints", "--disable-quic",
                "--force-color-profile=srgb", "--font-render-hinting=none",
                f"--user-data-dir={self._profile}", "--remote-debugging-pipe", "about:blank"]
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{hi_r} 4>&{hi_w}', self.binary, *args],
            pass_fds=(hi_r, hi_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        for fd in {to_browser_r, from_browser_w, hi_r, hi_w}:
            os.close(fd)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = os.fdopen(from_browser_r, "rb", buffering=0)
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Fetch.enable", patterns=[{"urlPattern": "http*://*"}])
        return self

    def __exit__(self, *exc):
        try:
            self.call("Browser.close", timeout=5, session=False)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self._out, self._in):
            try:
                f.close()
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def _write(self, message: dict) -> None:
        data = json.dumps(message).encode() + b"\0"
        with self._lock:
            self._out.write(data)

    def _read_loop(self) -> None:
        buf = b""
        while True:
            try:
                chunk = self._in.read(1 << 16)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                for q in list(self._pending.values()):
                    q.put({"error": {"message": "Chromium closed the pipe"}})
                return
            buf += chunk
            *messages, buf = buf.split(b"\0")
            for raw in messages:
                self._dispatch(json.loads(raw))

    def _dispatch(self, msg: dict) -> None:
        if "id" in msg:
            q = self._pending.pop(msg["id"], None)
            if q is not None:
                q.put(msg)
            return
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Fetch.requestPaused":
            self._route(params)
        elif method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            text = (d.get("exception") or {}).get("description") or d.get("text")
            self.events.append({"kind": "exception", "text": text, "url": d.get("url", "")})
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.events.append({"kind": "console.error", "text": text, "url": ""})
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            e = params["entry"]
            self.events.append({"kind": f"log.{e.get('source')}", "text": e.get("text", ""), "url": e.get("url", "")})
        with self._lock:
            waiters = [w for w in self._waiters if w[0] == method]
        for w in waiters:
            w[1].put(params)

    def _route(self, params: dict) -> None:
        rid, url = params["requestId"], params["request"]["url"]
        sid = self.session
        if self.local_prefix and url.startswith(self.local_prefix):
            self._write({"id": next(self._ids), "sessionId": sid, "method": "Fetch.continueRequest",
                         "params": {"requestId": rid}})
            return
        if self.mathjax_dir and url.startswith(MATHJAX_CDN):
            path = self.mathjax_dir / url[len(MATHJAX_CDN):].split("?")[0]
            if path.is_file():
                self.served_locally.append(url)
                kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                self._write({"id": next(self._ids), "sessionId": sid, "method": "Fetch.fulfillRequest",
                             "params": {"requestId": rid, "responseCode": 200,
                                        "responseHeaders": [{"name": "Content-Type", "value": kind},
                                                            {"name": "Access-Control-Allow-Origin", "value": "*"}],
                                        "body": base64.b64encode(path.read_bytes()).decode()}})
                return
        self.blocked.append(url)
        self._write({"id": next(self._ids), "sessionId": sid, "method": "Fetch.failRequest",
                     "params": {"requestId": rid, "errorReason": "BlockedByClient"}})

    # ---- commands --------------------------------------------------------------------------------
    def send(self, method: str, **params) -> None:
        """Fire and forget (its reply is dropped)."""
        msg = {"id": next(self._ids), "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        self._write(msg)

    def call(self, method: str, timeout: float = 60, session: bool = True, **params) -> dict:
        mid = next(self._ids)
        q: queue.Queue = queue.Queue()
        self._pending[mid] = q
        msg = {"id": mid, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        self._write(msg)
        try:
            reply = q.get(timeout=timeout)
        except queue.Empty:
            raise ProtocolError(f"{method}: no reply in {timeout:g} s") from None
        if "error" in reply:
            raise ProtocolError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def js(self, expression: str, timeout: float = 30):
        """Evaluate ``expression`` in the page (awaiting a promise) and return its JSON value."""
        r = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True,
                      userGesture=True, timeout=timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise ProtocolError(f"page script failed: {(d.get('exception') or {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15, interval: float = 0.05):
        deadline = time.monotonic() + timeout
        while True:
            value = self.js(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(interval)

    # ---- pages -------------------------------------------------------------------------------------
    def viewport(self, width: int, height: int, mobile: bool) -> None:
        self._viewport = (width, height, mobile)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=mobile)

    def goto(self, url: str, timeout: float = 30) -> None:
        """Load ``url`` and wait for its load event, then for MathJax (when the page has it) to finish."""
        self.events = []
        q: queue.Queue = queue.Queue()
        with self._lock:
            self._waiters.append(("Page.loadEventFired", q))
        try:
            r = self.call("Page.navigate", url=url)
            if r.get("errorText"):
                raise ProtocolError(f"{url}: {r['errorText']}")
            q.get(timeout=timeout)
        except queue.Empty:
            raise ProtocolError(f"{url}: no load event in {timeout:g} s") from None
        finally:
            with self._lock:
                self._waiters.remove(("Page.loadEventFired", q))
        # A redirect page (<meta http-equiv="Refresh">) loads, then its target does: wait for a page
        # that is complete and stays put.
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.js("document.readyState === 'complete' && !!document.body && "
                           "!document.querySelector('meta[http-equiv=Refresh i]')"):
                    break
            except ProtocolError as err:  # navigated away while we asked: ask the new page
                if "navigated" not in str(err) and "context" not in str(err):
                    raise
            if time.monotonic() > deadline:
                raise ProtocolError(f"{url}: the page did not settle in {timeout:g} s")
            time.sleep(0.05)
        # MathJax 3 typesets asynchronously after load; wait on its own promise when it is there.
        self.js("(window.MathJax && MathJax.startup && MathJax.startup.promise) ? "
                "MathJax.startup.promise.then(() => true, () => false) : false", timeout=timeout)

    def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) at the centre of the first element matching ``selector``."""
        box = self.js(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
            if (!el) return null; el.scrollIntoView({{block: 'center'}});
            const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        if box is None:
            raise ProtocolError(f"nothing matches {selector!r}")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def press(self, selector: str, key: str, code: int) -> None:
        """Focus ``selector`` and press a key on it (``ArrowRight``, 39), as a keyboard user would."""
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        for kind in ("rawKeyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=code)

    def screenshot(self, path: Path, clip_selector: str | None = None, screens: int = 1) -> None:
        """A PNG of the viewport, of the page's first ``screens`` screenfuls, or of one element."""
        params = {"format": "png"}
        if screens > 1 and not clip_selector:
            # a taller window, not a capture beyond it: sticky sidebars then stay where a reader sees them
            width, height, mobile = self._viewport
            full = self.js("document.documentElement.scrollHeight")
            self.viewport(width, min(full, screens * height), mobile)
            try:
                data = self.call("Page.captureScreenshot", **params)["data"]
            finally:
                self.viewport(width, height, mobile)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(base64.b64decode(data))
            return
        if clip_selector:
            rect = self.js(f"""(() => {{ const el = document.querySelector({json.dumps(clip_selector)});
                el.scrollIntoView({{block: 'start'}}); const r = el.getBoundingClientRect();
                return {{x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}}; }})()""")
            params.update(clip={**rect, "scale": 1}, captureBeyondViewport=True)
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))


def _high_fd(fd: int) -> int:
    """A duplicate of ``fd`` numbered 10 or more, so moving it onto 3 or 4 never clobbers the other."""
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD, 10)

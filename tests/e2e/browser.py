"""Headless Chromium driven over the DevTools protocol (CDP), for tests that load a page as a user's browser does.

    with Browser() as browser:
        page = browser.load(path)            # a file's file:// URL; waits for the load event
        page.requests                        # every URL the page asked for (Network.requestWillBeSent)
        page.problems()                      # console errors and uncaught exceptions
        page.evaluate("JSON.stringify(...)") # a JavaScript expression's value
        page.screenshot(png_path)            # the whole page as PNG

The browser is `chromium` or `chromium-browser` from PATH, started with its own temporary profile and
`--remote-debugging-port=0` (it picks a free port and names it on stderr and in the profile's DevToolsActivePort
file). One websocket to the browser's endpoint carries everything: the page is attached with a flat session
(Target.attachToTarget). Leaving the `with` block kills the browser's whole process group and removes the profile,
whatever happened inside it.
"""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("chromium", "chromium-browser")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0")
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")
MAX_SCREENSHOT_PX = 16384  # Chromium's largest texture side; a longer page is cut there


def find_chromium() -> str | None:
    """The path of `chromium` or `chromium-browser` on PATH, or None."""
    for name in BINARIES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


class _Connection:
    """One CDP websocket: numbered commands and their replies; every event that arrives meanwhile is kept."""

    def __init__(self, url: str, timeout: float):
        import websocket  # websocket-client (the dev extra); imported here so find_chromium() works without it

        self._timeout_error = websocket.WebSocketTimeoutException
        # Chromium refuses a websocket whose handshake has an Origin header unless --remote-allow-origins says so.
        self.socket = websocket.create_connection(url, timeout=timeout, suppress_origin=True)
        self.timeout = timeout
        self.events = []  # (session id or None, method, params), in arrival order
        self._next_id = 0

    def command(self, method: str, params: dict | None = None, session: str | None = None,
                timeout: float | None = None) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._receive(deadline, f"the reply to {method}")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method} failed: {reply['error']}")
                return reply.get("result", {})

    def wait_for(self, method: str, session: str | None, after: int, timeout: float) -> dict:
        """The params of the first `method` event of `session` at or after index `after` of `events`."""
        deadline = time.monotonic() + timeout
        while True:
            for owner, name, params in self.events[after:]:
                if name == method and owner == session:
                    return params
            after = len(self.events)
            self._receive(deadline, method)

    def _receive(self, deadline: float, waiting_for: str) -> dict:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BrowserError(f"no {waiting_for} from Chromium in time")
        self.socket.settimeout(left)
        try:
            message = json.loads(self.socket.recv())
        except self._timeout_error:
            raise BrowserError(f"no {waiting_for} from Chromium in time") from None
        if "method" in message:
            self.events.append((message.get("sessionId"), message["method"], message.get("params", {})))
        return message

    def close(self) -> None:
        try:
            self.socket.close()
        except Exception:  # noqa: BLE001 - the browser is being killed anyway
            pass


@dataclass
class ConsoleMessage:
    source: str  # console (Runtime.consoleAPICalled), exception (Runtime.exceptionThrown), log (Log.entryAdded)
    level: str  # error, warning, log, info, ...
    text: str
    url: str = ""

    def __str__(self) -> str:
        return f"[{self.source} {self.level}] {self.text}" + (f" ({self.url})" if self.url else "")


@dataclass
class Page:
    """A page loaded by `Browser.load`: what it requested and logged, and commands to run in it."""
    url: str
    _connection: _Connection = field(repr=False)
    _session: str = field(repr=False)
    _first_event: int = field(repr=False)

    def _events(self):
        return [(name, params) for owner, name, params in self._connection.events[self._first_event:]
                if owner == self._session]

    @property
    def requests(self) -> list[str]:
        """Every URL the page requested, in order (Network.requestWillBeSent), the page's own URL included."""
        return [params["request"]["url"] for name, params in self._events() if name == "Network.requestWillBeSent"]

    @property
    def console(self) -> list[ConsoleMessage]:
        """Console API calls (any level), uncaught exceptions, and browser log entries of level error or warning."""
        found = []
        for name, params in self._events():
            if name == "Runtime.consoleAPICalled":
                text = " ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", []))
                level = {"assert": "error", "warn": "warning"}.get(params["type"], params["type"])
                found.append(ConsoleMessage("console", level, text))
            elif name == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                text = (details.get("exception") or {}).get("description") or details.get("text", "")
                found.append(ConsoleMessage("exception", "error", text, details.get("url", "")))
            elif name == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                entry = params["entry"]
                found.append(ConsoleMessage("log", entry["level"], entry.get("text", ""), entry.get("url", "")))
        return found

    def problems(self, levels=("error",)) -> list[ConsoleMessage]:
        """Console messages of these levels (uncaught exceptions are level error)."""
        return [message for message in self.console if message.level in levels]

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (by value: JSON-able results only)."""
        result = self._connection.command("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                               "awaitPromise": True}, self._session)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"{expression[:80]!r} threw: "
                               f"{(details.get('exception') or {}).get('description') or details.get('text')}")
        return result["result"].get("value")

    def screenshot(self, path: Path | None = None) -> bytes:
        """A PNG of the whole page (beyond the viewport, up to MAX_SCREENSHOT_PX a side); written to `path` if
        given."""
        import base64

        metrics = self._connection.command("Page.getLayoutMetrics", session=self._session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        width = min(max(1, math.ceil(size["width"])), MAX_SCREENSHOT_PX)
        height = min(max(1, math.ceil(size["height"])), MAX_SCREENSHOT_PX)
        shot = self._connection.command("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True, "fromSurface": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}}, self._session, timeout=120)
        png = base64.b64decode(shot["data"])
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(png)
        return png


class Browser:
    """Headless Chromium for the length of a `with` block (see the module docstring)."""

    def __init__(self, binary: str | None = None, timeout: float = 60.0, viewport=(1280, 900)):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError(f"no Chromium: none of {', '.join(BINARIES)} is on PATH")
        self.timeout, self.viewport = timeout, viewport
        self.process = self.profile = self._connection = None

    def __enter__(self) -> "Browser":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="evalsuite-chromium-"))
        self._stderr = open(self.profile.parent / (self.profile.name + ".stderr"), "w+")
        # Its own process group (session): close() kills the browser and every helper process it started.
        self.process = subprocess.Popen([self.binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
                                        start_new_session=True)
        self._connection = _Connection(self._endpoint(), self.timeout)

    def _endpoint(self) -> str:
        """The browser's websocket URL, from its stderr line or the profile's DevToolsActivePort file."""
        deadline = time.monotonic() + self.timeout
        port_file = self.profile / "DevToolsActivePort"
        while time.monotonic() < deadline:
            self._stderr.seek(0)
            found = _LISTENING.search(self._stderr.read())
            if found:
                return found.group(1)
            if port_file.is_file():
                lines = port_file.read_text().split()
                if len(lines) >= 2:
                    return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            if self.process.poll() is not None:
                raise BrowserError(f"{self.binary} exited ({self.process.returncode}) before DevTools listened: "
                                   f"{self.stderr_tail()}")
            time.sleep(0.05)
        raise BrowserError(f"{self.binary} did not open DevTools within {self.timeout:.0f} s: {self.stderr_tail()}")

    def stderr_tail(self, lines: int = 15) -> str:
        if not getattr(self, "_stderr", None) or self._stderr.closed:
            return ""
        self._stderr.seek(0)
        return "\n".join(self._stderr.read().strip().splitlines()[-lines:])

    def load(self, target, timeout: float | None = None) -> Page:
        """Open `target` (a path, loaded from its file:// URL, or a URL) in the browser's page, with the Network,
        Runtime, Log and Page domains enabled before navigating; returns once the load event fired."""
        url = Path(target).resolve().as_uri() if isinstance(target, Path) or "://" not in str(target) else target
        connection = self._connection
        targets = connection.command("Target.getTargets")["targetInfos"]
        page_target = next((t for t in targets if t["type"] == "page"), None)
        if page_target is None:
            page_target = {"targetId": connection.command("Target.createTarget", {"url": "about:blank"})["targetId"]}
        session = connection.command("Target.attachToTarget", {"targetId": page_target["targetId"],
                                                               "flatten": True})["sessionId"]
        first_event = len(connection.events)
        for domain in ("Network", "Runtime", "Log", "Page"):
            connection.command(f"{domain}.enable", session=session)
        width, height = self.viewport
        connection.command("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                                  "deviceScaleFactor": 1, "mobile": False}, session)
        before_navigation = len(connection.events)
        navigated = connection.command("Page.navigate", {"url": url}, session)
        if navigated.get("errorText"):
            raise BrowserError(f"cannot load {url}: {navigated['errorText']}")
        connection.wait_for("Page.loadEventFired", session, before_navigation, timeout or self.timeout)
        return Page(url=url, _connection=connection, _session=session, _first_event=first_event)

    def close(self) -> None:
        """Kill the browser's process group and remove its profile (safe to call twice, or after a failed start)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self.process is not None:
            if self.process.poll() is None:
                self._signal_group(signal.SIGTERM)
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            self._signal_group(signal.SIGKILL)  # helpers (renderer, zygote) that outlived the browser process
            self.process.wait()
            self._wait_for_group(5.0)
            self.process = None
        if getattr(self, "_stderr", None) and not self._stderr.closed:
            self._stderr.close()
            Path(self._stderr.name).unlink(missing_ok=True)
        if self.profile is not None:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    def _signal_group(self, number: int) -> None:
        try:
            os.killpg(self.process.pid, number)  # the group this Popen started (start_new_session), nothing else
        except ProcessLookupError:
            pass

    def _wait_for_group(self, seconds: float) -> None:
        """Until the killed helpers are gone (they are reaped by init, not by us), at most `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

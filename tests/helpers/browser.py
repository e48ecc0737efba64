"""Headless Chromium for the tests that open a rendered page: where one is, how it is started, and
(`DevTools`) how a page that builds itself after loading is read. LEXPILOT_CHROMIUM names a Chrome
of your own; the tests that need one are skipped, saying so, without."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium() -> str | None:
    """The browser to start: LEXPILOT_CHROMIUM, else the first Chromium or Chrome on PATH; None without one."""
    named = os.environ.get("LEXPILOT_CHROMIUM")
    if named:
        return named
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def dump_dom(browser: str, url: str, profile: Path, budget_ms: int = 5000) -> str:
    """The DOM of `url` once its scripts ran for `budget_ms` of virtual time (`--dump-dom`), in a
    browser profile of its own at `profile`; the browser ending in error fails the test."""
    done = subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class DevTools:
    """Headless Chromium driven over the DevTools protocol, for a page that builds itself after it
    loads (a single-page app fetching its data): `--dump-dom` would dump it before, and virtual time
    does not wait for what such a page fetches. `open(url)` opens a tab; `wait_for_text(needle)`
    polls the page's text until it holds `needle` or the time is up. Used as a context manager: the
    browser is stopped when it ends."""

    def __init__(self, browser: str, profile: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [browser, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        self.port = self._port()
        self._connections = contextlib.ExitStack()
        self._ws: Any = None
        self._id = 0

    def _port(self) -> int:
        """The port Chromium says it listens on (its stderr's `DevTools listening on ws://...`)."""
        found: list[int] = []

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                match = re.search(r"DevTools listening on ws://[^:/]+:(\d+)/", line)
                if match and not found:
                    found.append(int(match.group(1)))
            # (read to the end, so that the browser never blocks on a full pipe)

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + self.timeout
        while not found:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("Chromium did not start its DevTools server")
            time.sleep(0.05)
        return found[0]

    def __enter__(self) -> DevTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self._connections.close()
        self.proc.terminate()  # Chromium ends its own helper processes when asked to end
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def open(self, url: str) -> None:
        from websockets.sync.client import connect

        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/json/new?{urllib.parse.quote(url, safe='')}", method="PUT"
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as answer:
            target = json.load(answer)
        self._ws = self._connections.enter_context(
            connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=self.timeout)
        )

    def evaluate(self, expression: str) -> Any:
        self._id += 1
        self._ws.send(
            json.dumps(
                {
                    "id": self._id,
                    "method": "Runtime.evaluate",
                    "params": {"expression": expression, "returnByValue": True},
                }
            )
        )
        while True:
            message = json.loads(self._ws.recv(timeout=self.timeout))
            if message.get("id") == self._id:
                return message.get("result", {}).get("result", {}).get("value")

    def text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_for_text(self, needle: str) -> str:
        """The page's text once it holds `needle`; the last text seen when the time is up."""
        deadline = time.monotonic() + self.timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if needle in text:
                break
            time.sleep(0.25)
        return text

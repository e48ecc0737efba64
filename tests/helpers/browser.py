"""Headless Chromium for the tests that open a rendered page: where one is, and how it is started.
LEXPILOT_CHROMIUM names a Chrome of your own; the tests that need one are skipped, saying so, without."""

from __future__ import annotations

import os
import shutil

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

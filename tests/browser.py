"""A real headless browser for tests: Debian's chromium, the DOM after the page's scripts ran.

What: `dump_dom(page)` opens a local HTML file (or URL) in a fresh headless chromium profile and
returns the DOM as serialised after its JavaScript ran (`--dump-dom`); `open_page()` drives the
same chromium through playwright (clicks, inputs, screenshots; no browser download: playwright
launches this binary); `missing_browser()` says
why no browser can run (the `browser` marker's need, see the root conftest.py). Why here: the
ladder page (issue 22) and the dashboard (issue 25) both check pages in a real browser; one
helper starts it the same way for both (install: `apt-get install -y chromium`, done by
`scripts/setup.sh dev`).

>>> CHROMIUM_NAMES[0]
'chromium'
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Names of a chromium binary, Debian's first.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

#: Flags of every launch: headless, no sandbox (root in containers), nothing from the network.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
)


def find_chromium() -> str | None:
    """The path of a chromium binary on PATH, or None."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def missing_browser() -> str | None:
    """Why no headless browser can run here (None: one can)."""
    if find_chromium() is None:
        return (
            "needs a headless chromium (none of " + ", ".join(CHROMIUM_NAMES) + " on PATH): "
            "apt-get install -y chromium, or scripts/setup.sh dev"
        )
    return None


def page_url(page: str | Path) -> str:
    """A URL for `page`: a URL as given, a local file as `file://` (absolute).

    >>> page_url("http://127.0.0.1:8000/x")
    'http://127.0.0.1:8000/x'
    >>> page_url("/tmp/a b.html")
    'file:///tmp/a%20b.html'
    """
    text = str(page)
    if "://" in text:
        return text
    return Path(text).resolve().as_uri()


def dump_dom(
    page: str | Path, *, timeout_s: float = 60.0, virtual_time_ms: int = 2000, fragment: str = ""
) -> str:
    """The DOM of `page` after its scripts ran, as chromium serialises it (`--dump-dom`).

    Args:
        page: a local HTML file or a URL (a server on loopback).
        timeout_s: the longest the browser may take (`subprocess.TimeoutExpired` past it; the
            browser is killed).
        virtual_time_ms: virtual time the page's timers get before the DOM is taken.
        fragment: appended to the URL after `#` (pages that read `location.hash`).
    """
    binary = find_chromium()
    if binary is None:
        raise RuntimeError(missing_browser())
    url = page_url(page) + (f"#{fragment}" if fragment else "")
    with tempfile.TemporaryDirectory(prefix="metabonk-chromium-") as profile:
        command = [
            binary,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={int(virtual_time_ms)}",
            "--dump-dom",
            url,
        ]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(
            f"chromium exited with {done.returncode} on {url}: {done.stderr.strip()[-2000:]}"
        )
    return done.stdout


@contextlib.contextmanager
def open_page(*, timeout_s: float = 30.0, viewport: tuple[int, int] = (1280, 900)) -> Iterator[Any]:
    """A playwright page in a fresh headless chromium (the one `find_chromium` finds, launched
    with `CHROMIUM_FLAGS`); the browser is closed on exit.

    Args:
        timeout_s: the default timeout of every wait and action of the page.
        viewport: the window's size in CSS pixels (what screenshots show).
    """
    from playwright.sync_api import sync_playwright

    binary = find_chromium()
    if binary is None:
        raise RuntimeError(missing_browser())
    flags = [f for f in CHROMIUM_FLAGS if f != "--headless"]  # playwright adds its own
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=binary, headless=True, args=flags)
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            page.set_default_timeout(timeout_s * 1000.0)
            yield page
        finally:
            browser.close()

"""The one headless Chromium both browser checks drive: Debian's /usr/bin/chromium (or $CHROMIUM).

`make test` checks for it before anything else runs (and installs it where it can), so a missing
browser here is a failure that names what to install, never a silent skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright  # pinned in requirements.txt
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install chromium "
                    "(make test does it when it can)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()

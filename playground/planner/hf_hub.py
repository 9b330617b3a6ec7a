"""Where a config.json comes from when it is named by a Hugging Face repo id: the local hub cache, offline."""

from __future__ import annotations

import os
import re
from pathlib import Path

from playground.planner.errors import PlanError

__all__ = ["REPO_ID", "from_hub_cache"]

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def from_hub_cache(name: str) -> Path:
    """A Hugging Face repo id (``owner/name``) that is not a path here: its config.json from the local hub
    cache (``HF_HUB_CACHE``, ``HF_HOME``/hub or ~/.cache/huggingface/hub), the snapshot ``refs/main`` names
    or else the newest; the planner never downloads.  Anything else: a one-line error."""
    if not REPO_ID.match(name) or name.endswith(".json"):
        raise PlanError(f"no such file or folder: {name}")
    hub = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME") or
                                                       Path.home() / ".cache" / "huggingface") / "hub")
    repo = hub / ("models--" + name.replace("/", "--"))
    main = repo / "refs" / "main"
    snapshots = [repo / "snapshots" / main.read_text().strip()] if main.is_file() else \
        sorted((repo / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for snapshot in snapshots:
        if (snapshot / "config.json").is_file():
            return snapshot / "config.json"
    raise PlanError(f"no such file or folder: {name}, nor a config.json for that Hugging Face repo in {hub} (the "
                    f"planner reads offline: fetch it with `hf download {name} config.json`, or pass "
                    "the file's path)")

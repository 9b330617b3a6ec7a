"""The replay's rows kept on disk between processes, for as long as the package's code is unchanged.

Replaying every published run with its range is half a minute of arithmetic on two cores, and the
same half minute comes back in every process that asks: the benchmark, the test suite, chapter 6's kernel.  The
answer depends only on the package's source (every constant, row and formula is code), so
``remembered`` keeps it in ``_build/replay-cache/`` of a source checkout under a key hashed from every
``.py`` file of ``playground/`` and the Python version: an edit anywhere in the package, or another
interpreter, computes it afresh.  An installed package (no checkout around it) or
``PLAYGROUND_REPLAY_CACHE=off`` computes it every time; a file that cannot be read is computed over.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path

__all__ = ["CACHE_DIR", "source_key", "remembered"]

_PACKAGE = Path(__file__).resolve().parent.parent
# a checkout holds the book beside the package; _build/ is its build output, ignored by git, emptied by make clean
CACHE_DIR = _PACKAGE.parent / "_build" / "replay-cache" if (_PACKAGE.parent / "_toc.yml").exists() else None


@functools.lru_cache(maxsize=1)
def source_key() -> str:
    """A hash of every ``.py`` file of the package (path and bytes) and the interpreter's version."""
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def remembered(name: str, compute, folder: Path | None = None):
    """``compute()``, or what it returned last time for ``name`` under the same ``source_key``."""
    folder = folder or CACHE_DIR
    if folder is None or os.environ.get("PLAYGROUND_REPLAY_CACHE", "").lower() in ("off", "0", "no"):
        return compute()
    path = Path(folder) / f"{name}-{source_key()}.pickle"
    try:
        return pickle.loads(path.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        pass   # absent, or half written by a process that was killed: compute it over
    value = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob(f"{name}-*.pickle"):   # older code's answers are never read again
            old.unlink(missing_ok=True)
        # written beside and renamed: a process reading at the same time sees the whole file or none
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as tmp:
            tmp.write(pickle.dumps(value))
        os.replace(tmp.name, path)
    except OSError:
        pass   # a read-only checkout: the answer is still right, only not kept
    return value

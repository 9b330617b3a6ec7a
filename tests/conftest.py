import os
import sys

# Rank functions in tests/**/*.py must be importable by name in the ranks the launcher starts:
# the tests folder and each of its part folders (tests/<part>/ mirrors playground/<part>/).
_HERE = os.path.dirname(os.path.abspath(__file__))
for _folder in sorted(os.listdir(_HERE)):
    if os.path.isdir(os.path.join(_HERE, _folder)) and not _folder.startswith((".", "_")):
        sys.path.insert(0, os.path.join(_HERE, _folder))
sys.path.insert(0, _HERE)
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run only where CUDA is; elsewhere they skip, saying why."""
    import pytest
    import torch
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (scripts/gpu_check.sh runs these on one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

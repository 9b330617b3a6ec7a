import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # rank functions in tests/*.py must be importable
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

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # rank functions in tests/*.py must be importable
os.environ.setdefault("MPLBACKEND", "Agg")

"""``python -m playground.figures [NAME ...] [--list]``: regenerate the book's figures."""

from __future__ import annotations

import argparse
import sys
import time

from playground.figures import load_all
from playground.plotting import FIGURES_DIR, save


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="figure files to make (default: all)")
    parser.add_argument("--list", action="store_true", help="list the registered figures")
    opts = parser.parse_args(argv)
    registry = load_all()
    if opts.list:
        for name, fn in registry.items():
            print(f"{name:40s} {fn.__module__}.{fn.__name__}")
        return 0
    unknown = [n for n in opts.names if n not in registry]
    if unknown:
        print(f"error: unknown figure(s) {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    try:
        for name in opts.names or registry:
            start = time.perf_counter()
            path = save(registry[name](), name, FIGURES_DIR)
            print(f"{path.relative_to(FIGURES_DIR.parent)}  ({time.perf_counter() - start:.1f} s)")
    except OSError as exc:  # a folder or file that cannot be written
        print(f"error: cannot write {name}: {exc.strerror or exc}: {exc.filename or FIGURES_DIR}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

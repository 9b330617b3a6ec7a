"""``python -m playground.bench NAME [options] [--json] [--save]``."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from playground.bench import benchmarks
from playground.launch import LaunchError, is_main_process
from playground.results import provenance

RESULTS_DIR = Path(__file__).resolve().parent.parent.parent / "results"


def _print_report(result: dict, indent: str = "") -> None:
    for key, value in result.items():
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _print_report(value, indent + "  ")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            print(f"{indent}{key}:")
            for row in value:
                print(indent + "  - " + ", ".join(f"{k}={v}" for k, v in row.items()))
        else:
            print(f"{indent}{key}: {value}")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # bad flags: one line on stderr and exit status 2, no usage dump
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None) -> int:
    mods = benchmarks()
    parser = _Parser(prog="python -m playground.bench", description=__doc__)
    sub = parser.add_subparsers(dest="name", required=True, metavar="NAME", parser_class=_Parser)
    for name, mod in mods.items():
        p = sub.add_parser(name, help=(mod.__doc__ or "").strip().splitlines()[0],
                           description=mod.__doc__)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--save", action="store_true", help=f"also write it under {RESULTS_DIR.name}/")
        p.add_argument("--out", metavar="FILE", help="also write the result, with its provenance, to FILE")
        mod.add_arguments(p)
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad flag (2, already said in one line)
        return int(exc.code or 0)
    args.command = shlex.join(["python", "-m", "playground.bench", *argv])
    try:
        result = mods[args.name].run(args)
    except (LaunchError, ValueError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the launcher has already stopped every rank
        print("interrupted", file=sys.stderr)
        return 130
    if not is_main_process():
        return 0  # under torchrun, rank 0 reports for the job
    result = {"benchmark": args.name, **result,
              "provenance": provenance(result.get("backend"))}
    if args.save:
        RESULTS_DIR.mkdir(exist_ok=True)
        dev = result["provenance"]["device"].split(" (")[0].replace(" ", "-").lower()
        variant = result.get("variant")  # e.g. a schedule: its own file beside the default one
        path = RESULTS_DIR / f"{args.name}-{variant + '-' if variant else ''}{dev}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"saved {path.relative_to(RESULTS_DIR.parent)}", file=sys.stderr)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}", file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

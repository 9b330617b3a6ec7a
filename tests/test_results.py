"""Results on record carry their provenance; GPU runs are listed before CPU runs."""

import json

import pytest

from playground import results
from playground.bench.__main__ import main as bench_main


def test_a_saved_benchmark_is_on_record_with_its_origin(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr("playground.bench.__main__.RESULTS_DIR", tmp_path)
    assert bench_main(["launch", "--nproc", "2", "--repeats", "1", "--save", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    (record,) = results.on_record("launch")
    assert record == printed
    for key in ("host", "device", "device_count", "torch", "backend", "date", "git_commit"):
        assert key in record["provenance"]
    assert "CPU" in results.origin(record) and "gloo" in results.origin(record)


def test_gpu_runs_come_first(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    base = {"host": "h", "cpu_count": 2, "torch": "2.13", "backend": "nccl", "date": "2026-01-01",
            "git_commit": "abc"}
    for name, count in (("cpu", 0), ("h200", 8)):
        device = "CPU" if count == 0 else "NVIDIA H200"
        (tmp_path / f"allreduce-{name}.json").write_text(json.dumps(
            {"provenance": {**base, "device": device, "device_count": count}}))
    assert [r["provenance"]["device_count"] for r in results.on_record("allreduce")] == [8, 0]
    assert results.origin(results.on_record("allreduce")[0]).startswith("8 x NVIDIA H200")


def test_a_bad_benchmark_argument_is_one_line_and_exit_2(capsys):
    assert bench_main(["launch", "--repeats", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1


@pytest.mark.parametrize("argv,message", [
    (["allreduce", "--sizes-mb", "inf"], "--sizes-mb must each be finite"),
    (["allreduce", "--sizes-mb", "1e9"], "GB, more than"),
    (["pipeline", "--forward-ms", "nan"], "--forward-ms must be a finite number"),
    (["pipeline", "--forward-ms", "1e9"], "beyond the benchmark's 600 s limit"),
    (["pipeline", "--chunks", "0"], "--chunks must be >= 1"),
    (["zero", "--d-model", "1000000"], "GB, more than"),
    (["mfu", "--device", "cpu", "--hidden", "100000"], "GB, more than"),
    (["launch", "--nproc", "1000"], "at most 64"),
])
def test_impossible_benchmark_sizes_are_refused_up_front(argv, message, capsys):
    """Refused in one line before anything is allocated or launched (no hang, no traceback)."""
    assert bench_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1 and message in err, err


def test_ctrl_c_during_a_benchmark_is_one_line_and_exit_130(monkeypatch, capsys):
    from playground.bench import benchmarks

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(benchmarks()["launch"], "run", interrupted)
    assert bench_main(["launch"]) == 130
    assert capsys.readouterr().err == "interrupted\n"

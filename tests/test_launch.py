"""The launcher: run one function on N ranks, fail loudly and cleanly, never leave a child behind."""

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import launch_workers as w
from playground.launch import LaunchError, LaunchTimeoutError, RankFailedError, run


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead for our purposes
        return f.read().split(")")[-1].split()[0] != "Z"


def _children():
    return [p for p in mp.active_children() if p.name.startswith("rank")]


def test_values_come_back_in_rank_order_with_args():
    values = run(w.rank_and_size, 4, 10)
    assert values == [(10 + r, 4, 4, 1) for r in range(4)]  # one thread per rank on gloo


def test_world_size_one_works():
    assert run(w.sum_of_ranks, 1) == [0.0]


def test_collective_output_is_replayed_in_rank_order(capsys):
    assert run(w.sum_of_ranks, 3) == [3.0, 3.0, 3.0]
    assert capsys.readouterr().out == "".join(f"[rank {r}] sum is 3\n" for r in range(3))


def test_whole_lines_rank_by_rank(capsys):
    run(w.chatty, 2)
    out = capsys.readouterr().out.splitlines()
    assert out == [f"[rank {r}] line {i}" for r in range(2) for i in range(3)]


def test_a_raising_rank_is_named_quickly_and_everyone_stops():
    start = time.monotonic()
    with pytest.raises(RankFailedError) as err:
        run(w.raise_on, 4, 2, timeout_s=60)
    assert time.monotonic() - start < 30
    assert err.value.rank == 2
    first = str(err.value).splitlines()[0]
    assert "rank 2" in first and "ValueError: boom from rank 2" in first
    assert "Traceback" in str(err.value)
    assert not _children()


def test_a_rank_that_dies_is_named():
    with pytest.raises(RankFailedError, match=r"rank 1 .*exited with code 3"):
        run(w.exit_on, 3, 1, timeout_s=60)
    assert not _children()


def test_a_native_crash_is_named_with_the_last_words_of_its_stderr():
    with pytest.raises(RankFailedError, match=r"rank 1 .*exited with code -6") as err:
        run(w.abort_on, 2, 1, timeout_s=60, quiet=True)
    assert "received 96 bytes, expected 64" in str(err.value)
    assert not _children()


def test_a_rank_that_exits_0_without_returning_is_blamed_not_its_peers():
    with pytest.raises(RankFailedError, match=r"rank 1 .*exited with code 0") as err:
        run(w.exit_on, 3, 1, 0, timeout_s=60)
    assert err.value.rank == 1
    assert not _children()


def test_a_value_that_cannot_come_back_is_named_and_the_next_run_works():
    with pytest.raises(RankFailedError, match=r"rank 1 .*cannot receive \(not picklable\)"):
        run(w.unpicklable_on, 2, 1, timeout_s=60)
    assert not _children()
    assert run(w.sum_of_ranks, 2, quiet=True) == [1.0, 1.0]


@pytest.mark.parametrize("timeout_s", [0, -1, float("inf"), float("nan"), "5"])
def test_bad_timeout_is_refused(timeout_s):
    with pytest.raises(LaunchError, match="timeout_s"):
        run(w.pid, 2, timeout_s=timeout_s)


def test_a_hanging_rank_times_out_and_is_killed():
    start = time.monotonic()
    with pytest.raises(LaunchTimeoutError, match="timed out after 4 s"):
        run(w.hang_on, 2, 1, timeout_s=4)
    assert time.monotonic() - start < 20
    assert not _children()


def test_a_timeout_says_where_each_rank_waits():
    """Rank 1 sleeps outside any collective; the others wait in the barrier it never joins."""
    with pytest.raises(LaunchTimeoutError) as info:
        run(w.hang_on, 3, 1, timeout_s=4, quiet=True)
    where = info.value.where
    assert sorted(where) == [0, 1, 2]
    assert where[0].startswith("barrier, called at ") and where[0].endswith("launch_workers.py:37 in hang_on")
    assert where[2] == where[0]
    assert not where[1].startswith("barrier") and where[1].endswith("launch_workers.py:36 in hang_on")
    assert f"rank 1 waits in {where[1]}" in str(info.value)
    assert not _children()


@pytest.mark.parametrize("bad, message", [
    (lambda r, n: r, "module level"),
    (42, "must be a function"),
])
def test_functions_children_cannot_import_are_refused_before_starting(bad, message):
    with pytest.raises(LaunchError, match=message):
        run(bad, 2)
    assert not _children()


def test_a_function_defined_in_a_notebook_is_refused():
    def local(rank, world_size):
        return rank
    with pytest.raises(LaunchError, match="put it in a module"):
        run(local, 2)
    local.__module__ = "__main__"
    with pytest.raises(LaunchError, match="put it in a module"):
        run(local, 2)


@pytest.mark.parametrize("size", [0, -1, 1.5, "2", True, 1000])
def test_bad_world_size_is_refused(size):
    with pytest.raises(LaunchError, match="world_size"):
        run(w.pid, size)


def test_unpicklable_arguments_are_refused_before_starting():
    with pytest.raises(LaunchError, match="picklable"):
        run(w.rank_and_size, 2, lambda: 0)


def test_two_launches_at_once_from_two_processes():
    script = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import launch_workers as w
        from playground.launch import run
        if __name__ == "__main__":
            assert run(w.sum_of_ranks, 3, quiet=True) == [3.0] * 3
            print("ok")
    """)
    here = os.path.dirname(__file__)
    procs = [subprocess.Popen([sys.executable, "-c", script, here], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all(o[0].strip() == "ok" for o in outs)


_LONG_RUN = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import launch_workers as w
    from playground.launch import run
    if __name__ == "__main__":
        run(w.sleep_then_pid, 2, 600, sys.argv[2], timeout_s=900)
""")


def _ctrl_c_reaches_it():
    """Start a child as a terminal or a Jupyter kernel would, Ctrl-C raising KeyboardInterrupt: a
    runner that launched the tests in the background passes SIGINT down ignored, and Python leaves
    an ignored SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_long_run(tmp_path):
    """A parent process running 2 sleeping ranks; returns it and the ranks' pids."""
    proc = subprocess.Popen([sys.executable, "-c", _LONG_RUN, os.path.dirname(__file__),
                             str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_ctrl_c_reaches_it)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(tmp_path.glob("*.pid"))) < 2:
        time.sleep(0.2)
    pids = [int(f.read_text()) for f in sorted(tmp_path.glob("*.pid"))]
    assert len(pids) == 2 and all(_alive(p) for p in pids), pids
    return proc, pids


def _wait_gone(pids, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


def test_interrupt_ends_every_child(tmp_path):
    """The notebook's stop button is SIGINT to the kernel: no rank may outlive it."""
    proc, pids = _start_long_run(tmp_path)
    proc.send_signal(2)
    _, err = proc.communicate(timeout=30)
    assert "KeyboardInterrupt" in err
    assert _wait_gone(pids) == []


def test_children_of_a_killed_parent_exit_by_themselves(tmp_path):
    proc, pids = _start_long_run(tmp_path)
    proc.kill()  # no cleanup code runs in the parent
    proc.wait()
    assert _wait_gone(pids) == []


def _cli(*args, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env,
                          timeout=60, **kw)


def test_cli_refuses_bad_input_in_one_line_before_any_rank_starts():
    """A world size the demo cannot use, a bad --timeout, too many ranks: one line, exit 2."""
    cases = [(("playground.systems_map.compose", "--nproc", "3"), "error: compose_runs lays out a 2 x 2 grid"),
             (("playground.ring_pass", "--timeout", "nan"), "error: --timeout must be a finite"),
             (("playground.ring_pass", "--nproc", "1000"), "error: world_size 1000 is more local")]
    for args, message in cases:
        out = _cli(*args)
        assert out.returncode == 2 and message in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr and out.stderr.strip().count("\n") <= 1, out.stderr


_CLI_LONG_RUN = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, os.environ["TESTS_DIR"])
    import launch_workers as w
    from playground.launch_cli import cli
    if __name__ == "__main__":
        cli(w.sleep_then_pid, 600, os.environ["PID_DIR"], default_world_size=2)
""")


def test_ctrl_c_on_a_demo_is_one_line_exit_130_and_no_rank_survives(tmp_path):
    env = dict(os.environ, TESTS_DIR=os.path.dirname(__file__), PID_DIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", _CLI_LONG_RUN], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_ctrl_c_reaches_it)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(tmp_path.glob("*.pid"))) < 2:
        time.sleep(0.2)
    pids = [int(f.read_text()) for f in tmp_path.glob("*.pid")]
    proc.send_signal(2)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err == "interrupted: every rank was stopped\n", err
    assert len(pids) == 2 and _wait_gone(pids) == []

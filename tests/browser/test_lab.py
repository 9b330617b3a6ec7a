"""JupyterLab as a reader uses it (`make lab`), driven in headless Chromium.

One JupyterLab on a free loopback port (no token, no browser, its own JUPYTER_* folders, a copy of
chapters/ and figures/ in a temporary folder). The test opens the cheapest chapter that has an
explorer, checks that jupyterlab-myst renders its MyST (a figure, folded solutions, no raw
directive), runs every cell, and moves one control of its explorer and of every other chapter's
explorer (in a scratch notebook), checking that each explorer drew something on first display
and that its output changes. JupyterLab, its kernels and everything they started are stopped
whatever happens, and the teardown fails if any process outlives it.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "chapters/05_capacity_planning.ipynb"  # the cheapest chapter with an explorer (~16 s)
# every chapter's explorer, called as the chapter calls it (module, name): the scratch notebook
OTHERS = [("playground.data_parallel", "cost_explorer"),
          ("playground.pipeline_parallel", "bubble_explorer"),
          ("playground.zero", "explorer"),
          ("playground.systems_map.placement", "placement_explorer")]
RUN_TIMEOUT_S = 240
CHANGE_TIMEOUT_S = 60
# What a raw (unrendered) MyST block looks like to a reader.
RAW = ["```{", ":::{", "{figure}", "{solution}", "{exercise}", ":class: dropdown"]

# The text of every output a cell shows, without the controls' own labels and readouts: what a
# reader sees change when an explorer redraws (an image's data, a table, a printed report).
SNAPSHOT_JS = """cell => {
  const out = cell.querySelector('.jp-Cell-outputArea');
  if (!out) return {imgs: [], texts: [], drawn: false};
  const imgs = Array.from(out.querySelectorAll('img'));
  const texts = Array.from(out.querySelectorAll(
      '.widget-html-content, .jupyter-widgets-output-area .jp-OutputArea-output'))
      .map(e => e.innerText.trim()).filter(t => t);
  return {imgs: imgs.map(i => i.src.length + ':' + i.src.slice(-80)), texts,
          drawn: imgs.some(i => i.complete && i.naturalWidth > 0) || texts.length > 0};
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(folder: Path) -> None:
    """Every cell in the DOM (no windowing), and no news or update prompts over the notebook."""
    for plugin, values in [("notebook-extension/tracker", {"windowingMode": "none"}),
                           ("apputils-extension/notification",
                            {"fetchNews": "false", "checkForUpdates": False})]:
        path = folder / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _scratch_notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"explorer{i}", "metadata": {},
              "outputs": [], "source": f"from {module} import {name}\n{name}()"}
             for i, (module, name) in enumerate(OTHERS)]
    nb = {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                      "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=1) + "\n")


def _stop(server: subprocess.Popen) -> list[str]:
    """End the server, its kernels and their ranks; return what would not die."""
    try:
        family = [psutil.Process(server.pid)] + psutil.Process(server.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for proc in family:
            try:
                proc.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        family = psutil.wait_procs(family, timeout=10)[1]
        if not family:
            break
    server.wait(timeout=10)
    return [f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in family if p.is_running()]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lab")
    work = tmp / "work"
    for folder in ("chapters", "figures"):
        shutil.copytree(ROOT / folder, work / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    _scratch_notebook(work / "chapters" / "explorers.ipynb")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTER", "PYTEST_")) and k != "MPLBACKEND"}  # inline plots
    for var, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                     ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"), ("IPYTHONDIR", "ipython")]:
        (tmp / sub).mkdir()
        env[var] = str(tmp / sub)
    _write_settings(tmp / "settings")
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={_free_port()}", "--ServerApp.port_retries=20",
           "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={work}",
           "--ServerApp.terminals_enabled=False", "--LabApp.expose_app_in_browser=True",
           "--LabApp.news_url=None", "--LabApp.extension_manager=readonly",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp / "lab.log", "w")
    server = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        url = _wait_for_server(server, tmp / "runtime", tmp / "lab.log")
        yield url
    finally:
        left = _stop(server)
        log.close()
        assert not left, f"processes outlived JupyterLab: {left}"


def _wait_for_server(server, runtime: Path, log: Path, timeout_s: float = 90) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited ({server.returncode}):\n{log.read_text()[-2000:]}")
        for info in glob.glob(str(runtime / "jpserver-*.json")):
            url = f"http://127.0.0.1:{json.loads(Path(info).read_text())['port']}/"
            try:
                with urllib.request.urlopen(url + "api/status", timeout=5) as r:
                    if r.status == 200:
                        return url
            except OSError:
                pass
        time.sleep(0.3)
    pytest.fail(f"JupyterLab did not answer within {timeout_s:.0f} s:\n{log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def page(browser, lab):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    leaks: list[str] = []

    def route(r):
        if r.request.url.startswith(("data:", "blob:", lab, lab.replace("http", "ws"))):
            r.continue_()
        else:
            leaks.append(r.request.url)
            r.abort()
    context.route("**/*", route)
    p = context.new_page()
    yield p
    context.close()
    assert not leaks, f"JupyterLab requests left loopback: {leaks}"


def _open(page, lab: str, path: str) -> None:
    """Open a notebook and wait until each of its markdown cells shows rendered MyST."""
    cells = json.loads((ROOT / path).read_text() if (ROOT / path).exists() else '{"cells": []}')
    markdown = sum(c["cell_type"] == "markdown" for c in cells["cells"])
    page.goto(f"{lab}lab/tree/{path}?reset")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.wait_for_function("""n => { const m = document.querySelectorAll('.jp-MarkdownCell .myst');
        return m.length === n && Array.from(m).every(e => e.innerText.trim()); }""",
                           arg=markdown, timeout=90_000)


def _run_all(page) -> None:
    ok = page.evaluate("""async limit => {
        const app = window.jupyterapp;
        await app.serviceManager.ready;
        const panel = app.shell.currentWidget;
        await panel.sessionContext.ready;
        const run = app.commands.execute('notebook:run-all-cells');
        const late = new Promise(r => setTimeout(() => r('timeout'), limit * 1000));
        return await Promise.race([run, late]);
    }""", RUN_TIMEOUT_S)
    if ok is not True:
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        detail = "\n".join(errors.all_inner_texts())[-3000:]
        pytest.fail(f"run all cells: {'timed out' if ok == 'timeout' else 'a cell failed'}\n{detail}")


def _explorer_cells(page):
    cells = page.locator(".jp-CodeCell").filter(
        has=page.locator(".jp-OutputArea .widget-slider, .jp-OutputArea .widget-dropdown"))
    return [cells.nth(i) for i in range(cells.count())]


def _changed(page, cell, before, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = cell.evaluate(SNAPSHOT_JS)
        if now["drawn"] and (now["imgs"], now["texts"]) != (before["imgs"], before["texts"]):
            return True
        page.wait_for_timeout(250)
    return False


def _move_one_control(page, cell) -> str:
    """Move the explorer's first slider one step (back, if it sits at its end), or its first
    dropdown to another option; say which, or why the output did not change."""
    cell.scroll_into_view_if_needed()
    before = cell.evaluate(SNAPSHOT_JS)
    if not before["drawn"]:
        return "drew nothing on first display"
    handle = cell.locator(".widget-slider .noUi-handle").first
    if handle.count():
        label = cell.locator(".widget-slider .widget-label").first.inner_text()
        for key in ("ArrowRight", "ArrowLeft", "ArrowLeft"):
            handle.focus()
            page.keyboard.press(key)
            if _changed(page, cell, before, CHANGE_TIMEOUT_S / 3):
                return ""
        return f"slider {label!r} moved, output unchanged"
    select = cell.locator(".widget-dropdown select").first
    options = select.locator("option").all_inner_texts()
    current = select.input_value()
    select.select_option(index=next(i for i, o in enumerate(options) if o != current))
    return "" if _changed(page, cell, before, CHANGE_TIMEOUT_S) else "dropdown changed, output unchanged"


def test_chapter_renders_its_myst(page, lab):
    _open(page, lab, CHAPTER)
    figures = page.locator(".jp-MarkdownCell .myst figure img")
    assert figures.count() > 0, "no MyST {figure} rendered"
    page.wait_for_function("""() => Array.from(document.querySelectorAll('.myst figure img'))
        .every(i => i.complete && i.naturalWidth > 0)""", timeout=30_000)
    solutions = page.locator(".jp-MarkdownCell .myst details")
    assert solutions.count() > 0, "no solution dropdown rendered"
    assert page.locator(".jp-MarkdownCell .myst details[open]").count() == 0, "a solution is unfolded"
    text = "\n".join(page.locator(".jp-MarkdownCell .myst").all_inner_texts())
    raw = [marker for marker in RAW if marker in text]
    assert not raw, f"raw MyST shown in {CHAPTER}: {raw}"


def test_chapter_runs_and_its_explorer_responds(page, lab):
    _open(page, lab, CHAPTER)
    _run_all(page)
    cells = _explorer_cells(page)
    assert len(cells) == 1, f"{CHAPTER}: expected one explorer, found {len(cells)}"
    problem = _move_one_control(page, cells[0])
    assert not problem, f"{CHAPTER}'s explorer: {problem}"


def test_every_other_explorer_responds(page, lab):
    _open(page, lab, "chapters/explorers.ipynb")
    _run_all(page)
    cells = _explorer_cells(page)
    assert len(cells) == len(OTHERS), f"{len(cells)} of {len(OTHERS)} explorers show controls"
    problems = [f"{module}.{name}: {problem}" for (module, name), cell in zip(OTHERS, cells)
                if (problem := _move_one_control(page, cell))]
    assert not problems, "\n".join(problems)

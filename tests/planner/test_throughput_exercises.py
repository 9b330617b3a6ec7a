"""Chapter 6's exercise solutions quote what their code prints: run each self-contained one and hold
the quoted numbers to its output, so a changed constant cannot leave a solution saying the old value."""

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "06_throughput.ipynb"

# each solution's label -> the numbers its prose says the code prints
QUOTED = {
    "ex-throughput-bf16-loss": ("4.6", "76.0"),
    "ex-throughput-fp8-weight-cache": ("0.83", "5.31", "5.09", "4.1"),
    "ex-throughput-tp-overlap": ("9.95", "0.24", "10.70", "0.99", "11.46", "1.74", "7.7", "14.2"),
    "ex-throughput-ring-crossing": ("200", "450", "400"),
    "ex-throughput-unstated-network": ("0.26", "0.05", "1.04", "0.18", "1.80", "1.93", "0.22", "0.78", "42.74",
                                       "43.30"),
    "ex-throughput-expert-dp": ("14.34", "50", "1.64", "1.10", "2.44", "1.59", "0.40", "2.25"),
    "ex-throughput-comm-clock": ("5.84", "6.12", "1.048", "4.44", "4.76", "1.072"),
    "ex-throughput-dropless": ("3.4", "4.7", "9.2", "5.8"),
    "ex-throughput-moe-host": ("16.6", "0.68", "8.3", "3.2", "2.6"),
    "ex-throughput-moe-gaps": ("3,072", "1.66", "6.7", "24.7", "0.36", "2.19", "1.89", "22.41", "21.12"),
    "ex-throughput-host-micro-batch": ("12.5", "5.2", "59", "6,737", "6", "25,816", "30,621", "24,733", "16.7",
                                       "27.6", "22,785"),
    "ex-throughput-te-launch": ("3.46", "1.79", "5.56", "3.6", "5.9", "34", "14,848", "27,408", "30,692"),
}


def _solutions() -> dict[str, str]:
    cells = json.loads(CHAPTER.read_text())["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return {block.split("\n", 1)[0].strip(): block
            for block in re.findall(r"````\{solution\}(.*?)\n````", markdown, re.S)}


def _prints(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<solution>", "exec"), {})   # noqa: S102 - the chapter's own code
    return out.getvalue()


@pytest.mark.parametrize("label", sorted(QUOTED))
def test_a_solution_quotes_what_its_code_prints(label):
    block = _solutions()[label]
    prose = block.split("```python", 1)[0] + block.rsplit("```", 1)[-1]
    text = _prints(re.search(r"```python\n(.*?)```", block, re.S)[1])
    printed = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", text)]
    grouped = re.findall(r"\d{1,3}(?:,\d{3})+", text)         # thousands, as the prose writes them
    for quoted in QUOTED[label]:
        assert quoted in prose, f"{label}: the prose no longer quotes {quoted}"
        decimals = len(quoted.partition(".")[2])
        assert quoted in grouped if "," in quoted else any(f"{x:.{decimals}f}" == quoted for x in printed), \
            f"{label}: prints no {quoted}"

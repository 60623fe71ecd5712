"""The HTML report (self-contained, checked in headless Chromium) and `reproduce` on the store."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from archsep.config import RunConfig, TrainConfig
from archsep.experiments.base import PRESETS
from archsep.experiments.samples import Arch, SampleComplexityExperiment, Scale
from archsep.experiments.report import build
from archsep.experiments.reproduce import reproduce
from archsep.store import open_store, record
from archsep.results import RunResult

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
HAVE_CHROMIUM = Path(CHROMIUM).exists()
SCREENSHOT = Path("/tmp/archsep-report-screenshot.png")  # kept for a human to look at


class TinyPreset(SampleComplexityExperiment):
    description = "a tiny sample-complexity preset for the report tests"
    tiny = Scale(Ns=(2, 3), seeds=2, archs=(Arch("TF", "tf-b", {"mlp_width": 16}), Arch("FFN", "ffn", {})),
                 train={"budget": 1920, "eval_size": 200, "threshold": 0.9, "eval_every": 5},
                 task_params={"q": 1, "d": 4})
    full = quick = tiny
    separations = (("TF", "FFN"),)


@pytest.fixture(scope="module", autouse=True)
def _tiny_report_preset():
    """Registered for this module alone (a preset left in PRESETS joins every later test that
    loops over the registry)."""
    with PRESETS.temporary("test-tiny-report", TinyPreset):
        yield


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    mp = pytest.MonkeyPatch()
    mp.setenv("ARCHSEP_THREADS", "1")
    try:
        reproduce("test-tiny-report", "quick", out=out, workers=1, progress=False)
    finally:
        mp.undo()
    # one failed run outside the preset: the report lists it with its message
    bad = RunConfig("qstr", "ffn", {"N": 5, "d": 4}, {}, TrainConfig(budget=640, eval_size=200), 9, "FFN")
    with open_store(out) as st:
        st.add(record(RunResult(bad.run_id, bad.to_dict(), "error", None, 640, None, None,
                                error="RuntimeError: simulated failure\ntraceback...")))
    return out


def test_reproduce_writes_its_files_and_the_store(store_dir):
    for name in ("runs.csv", "summary.json", "summary.txt", "figure.png", "figure.svg", "archsep.db"):
        assert (store_dir / name).stat().st_size > 0, name
    summary = json.loads((store_dir / "summary.json").read_text())
    assert summary["preset"] == "test-tiny-report" and summary["claims"]
    with open_store(store_dir) as st:
        sweeps = st.sweeps()
        assert [s["preset"] for s in sweeps] == ["test-tiny-report"] and st.status()["pending"] == 0
    again = reproduce("test-tiny-report", "quick", out=store_dir, workers=1, progress=False)
    assert again.to_dict()["points"] == summary["points"]  # from the store, nothing recomputed


def test_the_report_has_everything_and_no_network_reference(store_dir):
    with open_store(store_dir) as st:
        text, data = build(st)
    assert "<script" not in text and "<link" not in text and "url(" not in text
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:|//)", text)
    assert len(re.findall(r"<img [^>]*src='data:image/png;base64,", text)) >= 2
    assert text.count("<details>") >= 10  # every run's config, and the sweep file
    assert "Claims checked" in text and ("did not hold" in text or ">held<" in text)
    # the extra run's generic analysis
    assert "Scaling exponents" in text and "Separation statements" in text and "Grid points" in text
    assert "simulated failure" in text
    env = data["environment"]
    import torch

    assert torch.__version__ in env["runs: torch"] and env["runs: device"] == "cpu"
    claims = {c["text"]: c for c in data["claims"]}
    assert any("alpha_FFN - alpha_TF" in t for t in claims)
    assert any("fewer samples" in t for t in claims)  # the preset's own claim
    json.dumps(data)


def test_report_cli_writes_one_file(store_dir, tmp_path):
    from archsep.cli import main

    dest = tmp_path / "r.html"
    assert main(["report", str(store_dir), "-o", str(dest)]) == 0
    assert dest.read_text().startswith("<!DOCTYPE html>")
    assert not list(tmp_path.glob("*.tmp"))


CHECK = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100);
  const d = document.createElement('div'); d.id = 'figcheck';
  d.textContent = 'images=' + imgs.length + ' rendered=' + ok.length +
                  ' details=' + document.querySelectorAll('details').length;
  document.body.appendChild(d);
});
</script></body>"""


def _chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
             "--host-resolver-rules=MAP * ~NOTFOUND",  # any network request would fail, so figures must be inline
             f"--user-data-dir={cwd / 'chromium-profile'}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=90, cwd=cwd)


@pytest.mark.browser
@pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
def test_the_report_renders_its_figures_in_headless_chromium(store_dir, tmp_path):
    with open_store(store_dir) as st:
        text, _ = build(st)
    page = tmp_path / "report.html"
    page.write_text(text)
    probe = tmp_path / "probe.html"  # the same page plus a probe that reads every image's decoded size
    probe.write_text(text.replace("</body>", CHECK))
    r = _chromium("--virtual-time-budget=10000", "--dump-dom", probe.as_uri(), cwd=tmp_path)
    m = re.search(r'id="figcheck">images=(\d+) rendered=(\d+) details=(\d+)<', r.stdout)
    assert m, r.stderr[-2000:]
    images, rendered, details = map(int, m.groups())
    assert images >= 2 and rendered == images and details >= 10

    shot = tmp_path / "shot.png"
    r = _chromium("--window-size=1200,2200", "--hide-scrollbars", f"--screenshot={shot}", page.as_uri(), cwd=tmp_path)
    assert shot.exists(), r.stderr[-2000:]
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(shot)[..., :3]
    assert img.shape[0] >= 2000 and img.shape[1] >= 1100
    colour = (img.max(-1) - img.min(-1)) > 0.3  # plotted lines and markers; text is grey
    assert colour.sum() > 2000, "the screenshot shows no coloured figure"
    assert len(np.unique((img * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 100
    try:
        shutil.copy(shot, SCREENSHOT)
    except OSError:
        pass


def test_a_figure_title_is_cut_per_line_and_never_inside_a_number():
    from archsep.reporting.plots import plain

    title = ("simple-1STR, linear link, d=10: samples to test MSE < 0.02 (paper B, Fig. 1b)\n"
             "runs: budget 1500000, threshold 0.02, eval size 5000, seeds 0, 1, 2, 3, 4")
    assert plain(title) == title  # each line fits: nothing cut (the whole once was, to 'budget 150000...')
    cut = plain("budget 1500000 " * 20, limit=40)
    assert cut.endswith("...") and all(w in ("budget", "1500000") for w in cut[:-3].split())
    assert plain("a\n" * 1000).count("\n") == 3 and plain("x$y") == r"x\$y"

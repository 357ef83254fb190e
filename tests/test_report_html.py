"""``report.html`` written by ``fg-sysid identify`` (fixed and floating base), rendered in headless Chromium.

Chromium (Debian package ``chromium``) loads the page from disk with networking disabled; a probe copy
of the page records each image's decoded size at the ``load`` event, read back with ``--dump-dom``; a
screenshot must not be blank. Without Chromium the rendering tests skip, unless the environment variable
``CI`` is set (then they fail: .ci/run installs Chromium).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.io import write_log
from fg_sysid.datasets.simulate import simulate
from fg_sysid.report_html import FIGURES, FLOATING_FIGURES
from fg_sysid.robots import load_robot

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")
PROBE = ('<script>window.addEventListener("load", function () {'
         ' for (const im of document.images) { im.setAttribute("data-w", im.naturalWidth);'
         ' im.setAttribute("data-h", im.naturalHeight); }'
         ' document.body.setAttribute("data-loaded", "yes"); });</script>')


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed but CI is set (.ci/run installs it)")
        pytest.skip("chromium is not installed (Debian: apt-get install chromium); set CI to make this fail")
    return exe


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _elements(text):
    p = _Elements()
    p.feed(text)
    return p.tags


def _chromium(args, tmp_path):
    exe = chromium()
    r = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def check_page(html_path, expected_ids, tmp_path):
    """Self-contained page; Chromium loads it, every expected figure decodes; the screenshot is not blank."""
    text = html_path.read_text(encoding="utf-8")
    tags = _elements(text)
    imgs = {a.get("id"): a for t, a in tags if t == "img"}
    assert set(imgs) == set(expected_ids)
    for a in imgs.values():
        assert a["src"].startswith("data:image/png;base64,") and a.get("alt")
    assert not [a for t, a in tags if t in ("script", "link", "iframe") or "http" in a.get("src", "")]

    probe = tmp_path / "probe.html"
    probe.write_text(text + PROBE, encoding="utf-8")
    dom = _chromium(["--virtual-time-budget=10000", "--dump-dom", probe.as_uri()], tmp_path)
    dom_tags = _elements(dom)
    assert any(t == "body" and a.get("data-loaded") == "yes" for t, a in dom_tags), dom[:500]
    sizes = {a["id"]: (int(a["data-w"]), int(a["data-h"])) for t, a in dom_tags if t == "img"}
    assert set(sizes) == set(expected_ids)
    for fid, (w, h) in sizes.items():
        assert w >= 400 and h >= 200, (fid, w, h)

    shot = tmp_path / "shot.png"
    _chromium(["--window-size=1280,2400", f"--screenshot={shot}", html_path.as_uri()], tmp_path)
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)[..., :3]
    assert img.shape[:2] == (2400, 1280)
    non_white = np.mean(np.any(img < 0.9, axis=-1))
    assert non_white > 0.05, non_white  # text and plots, not an empty page


@pytest.fixture(scope="module")
def fixed_fits(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    robot = load_robot("double_pendulum")
    write_log(simulate(robot, 2.0, 200.0, 0.01, 0).log, d / "train.parquet")
    out = {}
    for method in ("smoother", "ls-sg"):
        r = invoke("identify", d / "train.parquet", "--robot", "double_pendulum", "--out", d / method,
                   "--method", method, "--quiet")
        assert r.exit_code == 0, r.output
        out[method] = d / method
    return out


@pytest.mark.parametrize("method", ["smoother", "ls-sg"])
def test_report_html_fixed_base_renders_every_plot(fixed_fits, method, tmp_path):
    html = fixed_fits[method] / "report.html"
    assert (fixed_fits[method] / "report.md").is_file() and html.is_file()
    text = html.read_text(encoding="utf-8")
    for heading in ("Measured vs model efforts", "Friction", "Identified", "Identifiable combinations",
                    "Convergence", "Parameters (all, SI units)"):
        assert heading.lower() in text.lower(), heading
    assert "joint1" in text and "joint2" in text  # the parameter table names the joints
    check_page(html, FIGURES, tmp_path)


def test_report_html_floating_base_adds_forces_and_base(tmp_path):
    from fg_sysid.datasets.mujoco_sim import simulate_stance, to_log

    b1 = load_robot("b1")
    sim = simulate_stance(b1, 0.4, 200, seed=2, noise=0.005, motion="sway", randomize=True)
    write_log(to_log(sim), tmp_path / "b1.parquet")
    r = invoke("identify", tmp_path / "b1.parquet", "--robot", "b1", "--out", tmp_path / "fit",
               "--knot-stride", 4, "--no-use-forces", "--quiet", "--max-iterations", 10)
    assert r.exit_code == 0, r.output
    html = tmp_path / "fit" / "report.html"
    assert "total mass [kg]" in html.read_text(encoding="utf-8")
    check_page(html, FIGURES + FLOATING_FIGURES, tmp_path)

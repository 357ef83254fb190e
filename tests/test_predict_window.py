"""The held-out SG window chosen on the held-out log itself (issue 9, session 8; `fg_sysid.heldout_filter`).

The predict path used the training log's cross-validated window. On a clean held-out log that window
over-smooths the accelerations; on a noisy one a short window would amplify the noise. The rule under
test picks the window by the classical baseline's blocked CV on the log it is given. Oracle: the true
robot's efforts (in-class truth, so the true robot predicts the noise-free efforts exactly at the true
states): what remains through the path is the SG differentiation's error alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.io import write_log
from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.baseline import parameter_names
from fg_sysid.heldout_filter import log_sg_filter, resolve_heldout_filter
from fg_sysid.prediction import heldout_report
from fg_sysid.robots import load_robot
from fg_sysid.validation import relative_rmse

#: the window the training CV picks on a 20 s Z1 log at σ = 0.01 (551 ms, order 3; docs/benchmarks.md)
TRAINING_FILTER = {"window_s": 0.551, "polyorder": 3}


@pytest.fixture(scope="module")
def z1_logs():
    robot = load_robot("z1")
    clean = simulate(robot, 5.0, 1000.0, 0.0, 1)
    noisy = simulate(robot, 5.0, 1000.0, 0.01, 1, truth=clean.truth)  # same motion, σ = 0.01 on q, v, τ
    p_true = np.array([clean.truth["parameters"][n] for n in parameter_names(robot)])
    return robot, clean, noisy, p_true


def test_window_follows_the_logs_noise(z1_logs):
    """Noise-free log: a short window (≤ 20 ms); σ = 0.01 rad: it must not collapse (≥ 200 ms), and the
    true robot through it stays within a few % of the true efforts where a 50 ms window is > 100 % off."""
    robot, clean, noisy, p_true = z1_logs
    f_clean = log_sg_filter(clean.log, robot)
    f_noisy = log_sg_filter(noisy.log, robot)
    assert f_clean["window_s"] <= 0.02, f_clean
    assert f_noisy["window_s"] >= 0.2, f_noisy
    # the true robot through each path, scored against the noise-free efforts
    ref = clean.truth_log.tau
    log_path = heldout_report(p_true, robot, clean.log, sg_source="log")
    train_path = heldout_report(p_true, robot, clean.log, *TRAINING_FILTER.values())
    assert log_path["filter"]["chosen"].startswith("held-out log")
    assert log_path["filter"]["window"] == f_clean["window"]
    e_log, e_train = relative_rmse(log_path["tau"], ref), relative_rmse(train_path["tau"], ref)
    print(f"true robot, noise-free log: own window {100 * e_log:.3f} %, training {100 * e_train:.3f} %")
    assert e_log < 0.0015 and e_train > 3 * e_log, (e_log, e_train)
    noisy_path = heldout_report(p_true, robot, noisy.log, sg_source="log")
    e_noisy = relative_rmse(noisy_path["tau"], noisy.truth_log.tau)
    short = heldout_report(p_true, robot, noisy.log, 0.05, 3)
    e_short = relative_rmse(short["tau"], noisy.truth_log.tau)
    print(f"true robot, σ = 0.01 log: own window {100 * e_noisy:.2f} %, 50 ms {100 * e_short:.1f} %")
    assert e_noisy < 0.05 and e_short > 1.0, (e_noisy, e_short)


def test_fallbacks_say_why(z1_logs):
    robot, clean, _, p_true = z1_logs
    model = {"sg_filter": TRAINING_FILTER}
    no_tau = dataclasses.replace(clean.log, tau=np.full_like(clean.log.tau, np.nan))
    w, o, chosen = resolve_heldout_filter(model, robot, no_tau, source="log")
    assert (w, o) == (0.551, 3) and "no measured effort" in chosen
    assert resolve_heldout_filter(model, robot, clean.log, source="training") == (0.551, 3, "training")
    assert resolve_heldout_filter(model, robot, clean.log, 0.02, None, "log") == (0.02, 3, "given")
    w, o, chosen = resolve_heldout_filter({}, robot, no_tau, source="log")
    assert w is None and "default" in chosen
    with pytest.raises(ValueError, match="source"):
        resolve_heldout_filter(model, robot, clean.log, source="held-out")
    rep = heldout_report(p_true, robot, no_tau, sg_source="log")  # no efforts: prediction still made
    assert rep["overall"] is None and rep["tau"].shape == clean.log.tau.shape


def test_cli_predict_window_choice(z1_logs, tmp_path):
    """identify (ls-sg, noisy log) then predict a clean log: default = the clean log's own short window,
    --sg-window-from training = the training window; both printed; a bad choice exits 2 with no output."""
    robot, clean, noisy, _ = z1_logs
    write_log(noisy.log, tmp_path / "train.parquet")
    write_log(clean.log, tmp_path / "held.parquet")
    run = CliRunner()
    r = run.invoke(main, ["identify", str(tmp_path / "train.parquet"), "--robot", "z1", "--out",
                          str(tmp_path / "fit"), "--method", "ls-sg", "--quiet"])
    assert r.exit_code == 0, r.output
    r = run.invoke(main, ["predict", str(tmp_path / "fit"), str(tmp_path / "held.parquet"), "--out",
                          str(tmp_path / "own.csv")])
    assert r.exit_code == 0, r.output
    assert "chosen: held-out log" in r.output
    t = run.invoke(main, ["predict", str(tmp_path / "fit"), str(tmp_path / "held.parquet"), "--out",
                          str(tmp_path / "train.csv"), "--sg-window-from", "training"])
    assert t.exit_code == 0, t.output
    assert "chosen: training" in t.output
    own = pd.read_csv(tmp_path / "own.csv").drop(columns="t").to_numpy()
    trained = pd.read_csv(tmp_path / "train.csv").drop(columns="t").to_numpy()
    ref = clean.log.tau
    assert relative_rmse(own, ref) < relative_rmse(trained, ref)
    bad = run.invoke(main, ["predict", str(tmp_path / "fit"), str(tmp_path / "held.parquet"), "--out",
                            str(tmp_path / "bad.csv"), "--sg-window-from", "heldout"])
    assert bad.exit_code == 2 and "--sg-window-from" in bad.output
    assert not (tmp_path / "bad.csv").exists()

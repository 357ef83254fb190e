"""Degenerate data said plainly (issue 14 item 4): the issue's cases on a simulated z1 log through the
CLI (5 samples, no joint moves, all-zero efforts: exit 2 with the reason, or --allow-prior: the prior
with std_ratio 1), warnings naming unknown and all-zero columns, plain numbers in messages, and
`check_data` on good, partially excited and floating-base logs."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.io import LogError, load_log_for_robot, log_to_frame, read_log
from fg_sysid.datasets.log import Log
from fg_sysid.datasets.simulate import simulate
from fg_sysid.estimation.checks import COND_WARN, check_data
from fg_sysid.robots import load_robot


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def z1():
    return load_robot("z1")


@pytest.fixture(scope="module")
def good(z1):
    return simulate(z1, 2.0, 100.0, 0.01, 0).log


def _frame_cases(good: Log) -> dict[str, pd.DataFrame]:
    df = log_to_frame(good)
    still = df.copy()
    for c in df.columns:
        if c.startswith("q."):
            still[c] = df[c].iloc[0]
        elif c.startswith("v."):
            still[c] = 0.0
    zero = df.copy()
    zero[[c for c in df.columns if c.startswith("tau.")]] = 0.0
    return {"five": df.iloc[:5], "still": still, "zero": zero}


@pytest.mark.parametrize("case, needle", [
    ("five", "the log has 5 samples; at least 20 are needed"),
    ("still", "no joint moves: the largest position range is 0 (joint joint1)"),
    ("zero", "every measured effort is zero (tau.joint1, tau.joint2"),
])
@pytest.mark.parametrize("method", ["smoother", "ls-sg"])
def test_degenerate_logs_exit_2_with_reason(good, tmp_path, case, needle, method):
    path = tmp_path / f"{case}.csv"
    _frame_cases(good)[case].to_csv(path, index=False)
    r = invoke("identify", path, "--robot", "z1", "--out", tmp_path / "o", "--method", method, "--quiet")
    assert r.exit_code == 2, r.output
    assert "error: " in r.output and "cannot determine the parameters" in r.output and needle in r.output
    assert "--allow-prior" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "o").exists() and not any(p.name.startswith(".o.") for p in tmp_path.iterdir())
    if case == "zero":
        assert "warning: " in r.output and "effort column(s) entirely zero: tau.joint1" in r.output


def test_allow_prior_returns_the_prior(good, tmp_path):
    path = tmp_path / "still.csv"
    _frame_cases(good)["still"].to_csv(path, index=False)
    r = invoke("identify", path, "--robot", "z1", "--out", tmp_path / "o", "--quiet", "--allow-prior")
    assert r.exit_code == 0, r.output
    assert "the prior" in r.output and "no joint moves" in r.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["prior_only"] is True and s["method"] == "prior" and "no joint moves" in s["prior_only_reason"]
    assert s["data_checks"]["moving_joints"] == [] and len(s["data_checks"]["still_joints"]) == 6
    p = pd.read_csv(tmp_path / "o" / "parameters.csv")
    np.testing.assert_allclose(p["std_ratio"], 1.0, atol=1e-9)
    np.testing.assert_allclose(p["estimate"], p["prior_mean"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(p["std"], p["prior_std"], rtol=1e-9)
    assert "the prior, not an estimate" in (tmp_path / "o" / "report.md").read_text()
    # the written model predicts with the prior (predict reads it)
    held = tmp_path / "held.csv"
    log_to_frame(good).to_csv(held, index=False)
    r = invoke("predict", tmp_path / "o", held, "--out", tmp_path / "pred.csv")
    assert r.exit_code == 0, r.output


def test_good_log_passes_and_is_recorded(good, tmp_path):
    path = tmp_path / "good.parquet"
    log_to_frame(good).to_parquet(path)
    r = invoke("identify", path, "--robot", "z1", "--out", tmp_path / "o", "--method", "ls-sg", "--quiet")
    assert r.exit_code == 0, r.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    dc = s["data_checks"]
    assert dc["problems"] == [] and not s["prior_only"] and "log_conversion" not in s
    assert dc["regressor_rank"] == dc["identifiable_combinations"] > 40
    assert 1 < dc["condition_number"] < COND_WARN


def test_check_data_partial_excitation_warns(z1, good):
    q = good.q.copy()
    q[:, 1:] = q[0, 1:]  # only joint1 moves
    v = good.v.copy()
    v[:, 1:] = 0.0
    c = check_data(z1, replace(good, q=q, v=v))
    assert c.ok and c.moving_joints == ["joint1"]
    assert any("do not move" in w and "joint2" in w for w in c.warnings)
    assert any("weak excitation" in w for w in c.warnings)
    assert c.regressor_rank < c.identifiable_combinations


def test_check_data_too_few_equations(z1, good):
    c = check_data(z1, good.slice(0, 25))  # 25 samples x 6 joints = 150 >= R: length alone passes ...
    assert not any("samples; at least" in p for p in c.problems)
    tau = np.full_like(good.tau, np.nan)
    tau[:, 0] = good.tau[:, 0]  # ... but with one measured joint, 25 equations < R combinations
    c = check_data(z1, replace(good.slice(0, 25), tau=tau[:25]))
    assert any("effort equations" in p and "25 samples x 1 measured joints" in p for p in c.problems)


def test_check_data_no_effort_and_floating_base(good):
    z1 = load_robot("z1")
    c = check_data(z1, replace(good, tau=np.full_like(good.tau, np.nan)))
    assert any("no effort is measured" in p for p in c.problems)
    b1 = load_robot("b1")
    n, N = b1.n_joints, 50
    q0 = np.zeros(n)
    log = Log(t=np.arange(N) * 0.01, q=np.tile(q0, (N, 1)), v=None, tau=np.ones((N, n)),
              joint_names=tuple(b1.joint_names))
    c = check_data(b1, log)
    assert any("no joint moves" in p for p in c.problems) and c.regressor_rank is None


def test_unknown_columns_warned_with_suggestion(good, tmp_path):
    df = log_to_frame(good).rename(columns={"tau.joint1": "tua.joint1"})
    df["temperature"] = 20.0
    path = tmp_path / "typo.csv"
    df.to_csv(path, index=False)
    with pytest.warns(UserWarning) as rec:
        _, log = load_log_for_robot(path, "z1")
    msgs = [str(w.message) for w in rec]
    hit = [m for m in msgs if "outside the log schema" in m]
    assert len(hit) == 1 and "'tua.joint1' (did you mean 'tau.joint1'?)" in hit[0]
    assert "'temperature'" in hit[0]
    assert "'temperature' (did you mean" not in hit[0]
    assert not log.tau_measured[0]


def test_clean_log_gives_no_warning(good, tmp_path):
    path = tmp_path / "clean.csv"
    log_to_frame(good).to_csv(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_log(path, load_robot("z1"))


def test_messages_print_plain_numbers(good, tmp_path):
    df = log_to_frame(good)
    df.loc[3, "t"] = df.loc[2, "t"]
    path = tmp_path / "dup.parquet"
    df.to_parquet(path)
    with pytest.raises(LogError) as e:
        read_log(path, load_robot("z1"))
    assert "duplicate time 0.02 after 0.02" in str(e.value) and "np." not in str(e.value)
    r = invoke("identify", path, "--robot", "z1", "--out", tmp_path / "o", "--quiet")
    assert r.exit_code == 2 and "np.float64" not in r.output and "0.02 after 0.02" in r.output

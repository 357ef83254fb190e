"""`fg-sysid study`: a >= 40-run grid on a Dask LocalCluster, resume after an interrupt, failures recorded."""

import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.study import StudyConfigError, load_config, parse_config, run_study
from fg_sysid.study import runner as study_runner

TINY = {
    "name": "tiny",
    "robots": ["double_pendulum"],
    "motions": [{"name": "short", "duration": 1.0, "rate": 100}],
    "noise": [0.0, 0.01],
    "methods": ["ls-sg", "energy-ls"],
    "seeds": {"count": 5},
    "options": [{"name": "in-class"}, {"name": "out-of-class", "truth_friction_velocity_scale": 0.02}],
    "heldout": {"duration": 0.5},
}


def _write(tmp_path, cfg, name="study.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_config_expands_grid_and_rejects_bad_keys(tmp_path):
    cfg = parse_config(TINY, "tiny.yaml")
    assert len(cfg.runs) == 1 * 1 * 2 * 2 * 5 * 2
    assert len({r.run_id for r in cfg.runs}) == len(cfg.runs)
    out = [r for r in cfg.runs if r.option == "out-of-class"]
    assert all(r.truth["friction_velocity_scale"] == 0.02 and r.estimator["friction_velocity_scale"] == 0.05
               for r in out)
    for bad, needle in [({**TINY, "methods": ["nope"]}, "unknown method 'nope'"),
                        ({**TINY, "noise": [-1]}, "noise must be >= 0"),
                        ({**TINY, "colour": 1}, r"unknown key\(s\) \['colour'\]"),
                        ({**TINY, "options": [{"name": "x", "bogus": 1}]}, r"options\[0\]: unknown key"),
                        ({**TINY, "estimator": {"knot_stride": 0}}, "estimator.knot_stride")]:
        with pytest.raises(StudyConfigError, match=needle):
            parse_config(bad, "bad.yaml")
    with pytest.raises(StudyConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")


def test_study_on_local_cluster_resumes_after_interrupt(tmp_path, monkeypatch):
    distributed = pytest.importorskip("dask.distributed")
    cfg_path = _write(tmp_path, TINY)
    config = load_config(cfg_path)
    assert len(config.runs) == 40
    out = tmp_path / "out"

    # 1) interrupted: the 13th row write raises KeyboardInterrupt (as Ctrl-C would) -> 12 rows on disk
    real_write = study_runner._write_row
    calls = {"n": 0}

    def flaky_write(out_dir, spec, row):
        calls["n"] += 1
        if calls["n"] == 13:
            raise KeyboardInterrupt
        real_write(out_dir, spec, row)

    monkeypatch.setattr(study_runner, "_write_row", flaky_write)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with pytest.raises(KeyboardInterrupt):
            run_study(config, out, client=client, progress=False)
        monkeypatch.setattr(study_runner, "_write_row", real_write)
        first = study_runner.read_rows(out)
        assert len(first) == 12
        stamps = dict(zip(first.run_id, first.finished_at, strict=True))

        # 2) the CLI on the same cluster (--scheduler ADDRESS) finishes the other 28, redoing none
        r = CliRunner().invoke(main, ["study", str(cfg_path), "--out", str(out), "--scheduler",
                                      cluster.scheduler_address, "--quiet"])
    assert r.exit_code == 0, r.output
    assert "ran 28 now (0 failed), skipped 12" in r.output
    rows = pd.read_parquet(out / "results.parquet")
    assert len(rows) == 40 and set(rows.run_id) == {s.run_id for s in config.runs}
    assert (rows.status == "ok").all(), rows.loc[rows.status != "ok", "error"].tolist()
    again = rows.set_index("run_id").loc[list(stamps), "finished_at"]
    assert dict(again) == stamps  # the 12 finished before the interrupt were not run again
    assert len(list((out / "runs").glob("*.parquet"))) == 40
    # metrics are real numbers with the noise-free runs better than the noisy ones
    med = rows.groupby("noise")["heldout_rmse"].median()
    assert med[0.0] < med[0.01]
    report = (out / "report.md").read_text()
    assert "| double_pendulum | short | in-class | energy-ls | 0 | 5 | 0 |" in report
    assert (out / "error_vs_noise.png").stat().st_size > 1000
    assert (out / "error_boxes.png").stat().st_size > 1000

    # 3) nothing pending: a rerun skips everything
    r = CliRunner().invoke(main, ["study", str(cfg_path), "--out", str(out), "--workers", "0", "--quiet"])
    assert r.exit_code == 0 and "ran 0 now" in r.output and "skipped 40" in r.output


def test_failed_run_is_recorded_and_does_not_stop(tmp_path):
    cfg = {**TINY, "robots": ["b1", "double_pendulum"], "noise": [0.01], "methods": ["energy-ls"],
           "seeds": [0], "options": [{"name": "in-class"}]}
    path = _write(tmp_path, cfg)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["study", str(path), "--out", str(out), "--workers", "0", "--quiet"])
    assert r.exit_code == 0, r.output
    rows = pd.read_parquet(out / "results.parquet").set_index("robot")
    assert rows.loc["b1", "status"] == "failed"
    assert "fixed-base" in rows.loc["b1", "error"]
    assert rows.loc["double_pendulum", "status"] == "ok"
    assert "## Failed runs" in (out / "report.md").read_text()
    # --retry-failed runs it again (and it fails again, recorded once)
    r = CliRunner().invoke(main, ["study", str(path), "--out", str(out), "--workers", "0", "--quiet",
                                  "--retry-failed"])
    assert "ran 1 now (1 failed)" in r.output
    assert len(pd.read_parquet(out / "results.parquet")) == 2


def test_study_cli_bad_input(tmp_path):
    bad = _write(tmp_path, {**TINY, "methods": ["ls-sg", "magic"]}, "bad.yaml")
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["study", str(bad), "--out", str(out)])
    assert r.exit_code == 2
    assert r.output.count("error:") == 1 and "unknown method 'magic'" in r.output
    assert not out.exists()
    r = CliRunner().invoke(main, ["study", str(tmp_path / "none.yaml")])
    assert r.exit_code == 2 and "not found" in r.output
    r = CliRunner().invoke(main, ["study", "--help"])
    assert r.exit_code == 0 and "--scheduler" in r.output


@pytest.mark.parametrize("name", ["table1.yaml", "table2.yaml"])
def test_shipped_configs_parse(name):
    path = Path(__file__).resolve().parents[1] / "examples" / "studies" / name
    cfg = load_config(path)
    assert len(cfg.runs) >= 4


def test_local_process_pool(tmp_path):
    """The default executor: a spawned process pool (here 1 process, 2 runs)."""
    cfg = parse_config({**TINY, "noise": [0.0], "methods": ["energy-ls"], "seeds": [0, 1],
                        "options": [{"name": "in-class"}]}, "pool.yaml")
    counts = run_study(cfg, tmp_path / "out", workers=1, progress=False)
    rows = counts["results"]
    assert counts["ran"] == 2 and len(rows) == 2 and (rows.status == "ok").all()
    assert rows.host.nunique() == 1 and not rows.host.iloc[0].endswith(f":{os.getpid()}")


def test_random_initial_guesses():
    """init_spread: physically consistent guesses, reproducible per seed, spread as asked (log-mass std)."""
    import numpy as np

    from fg_sysid.estimation.baseline import pseudo_inertia_min_eigenvalues
    from fg_sysid.robots import load_robot
    from fg_sysid.study.methods import METHODS, random_initial_guess
    from fg_sysid.study.runner import run_one

    robot = load_robot("z1")
    nb = 10 * robot.n_bodies
    nominal = robot.nominal_inertial_parameters()[:, 0]
    draws = np.array([random_initial_guess(robot, 0.7, s) for s in range(40)])
    assert np.array_equal(draws[3], random_initial_guess(robot, 0.7, 3))
    assert all(np.all(pseudo_inertia_min_eigenvalues(d[:nb]) > 0) for d in draws)
    log_mass = np.log(draws[:, :nb:10] / nominal)
    assert 0.6 < log_mass.std() < 0.8  # 0.7 relative (log space), 240 draws
    with pytest.raises(StudyConfigError, match="init_spread must be >= 0"):
        parse_config({**TINY, "estimator": {"init_spread": -0.1}}, "bad.yaml")
    cfg = parse_config({**TINY, "noise": [0.0], "methods": ["energy-ls"], "seeds": [0],
                        "options": [{"name": "urdf"}, {"name": "guess", "init_spread": 0.7}]}, "g.yaml")
    rows = [run_one(s) for s in cfg.runs]
    assert [r["status"] for r in rows] == ["ok", "ok"] and rows[1]["init_spread"] == 0.7
    assert rows[0]["inertial_error"] != rows[1]["inertial_error"]
    # the smoothers start at the guess (baseline layout) in their own friction layout (estimated tanh width)
    cfg = parse_config({**TINY, "noise": [0.01], "methods": ["smoother", "smoother-fd"], "seeds": [0],
                        "options": [{"name": "guess", "init_spread": 0.7}]}, "g.yaml")
    rows = [run_one(s) for s in cfg.runs]
    assert [r["status"] for r in rows] == ["ok", "ok"], [r.get("error") for r in rows]
    assert "ls-sg" in METHODS

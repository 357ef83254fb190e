"""``fg-sysid export``: URDF (yourdfpy) and MJCF (MjSpec) round trips through Pinocchio and MuJoCo.

Oracles: the exported files, loaded by Pinocchio / MuJoCo, reproduce the identified model's inverse
dynamics (rigid body + armature + friction) to 1e-6 relative; exporting the URDF's own nominal
parameters gives back the URDF's own inertials; a MuJoCo rollout of the exported arm tracks a held-out
log of the same (simulated) robot better than the nominal URDF and as well as the truth allows.
"""

from __future__ import annotations

import json
import warnings

import mujoco
import numpy as np
import pinocchio as pin
import pytest
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.datasets.io import write_log
from fg_sysid.datasets.mujoco_sim import build_mujoco_spec
from fg_sysid.datasets.simulate import simulate, truth_arrays
from fg_sysid.export import (
    ExportError,
    dry_friction_shape,
    export_mjcf,
    export_urdf,
    identified_parameters,
    track_log,
    urdf_inertials,
)
from fg_sysid.robots import RobotModel, load_robot
from fg_sysid.validation import load_model, predict_efforts

ROBOT = "z1"  # a fixed child link (gripperStator) and a locked joint (jointGripper) merged into link06
REL_TOL = 1e-6


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def fit(tmp_path_factory):
    """A z1 identified by the smoother on 3 s of simulated data, and a held-out log of the same robot.

    The friction law is coulomb-viscous-lead (fc·tanh((v + T·a)/vs) + fv·v), the law ``--friction auto``
    (identify's default) picks on this log, pinned so the tests do not follow the selection."""
    d = tmp_path_factory.mktemp("export")
    robot = load_robot(ROBOT)
    train = simulate(robot, 3.0, 200.0, 0.005, 0)
    held = simulate(robot, 3.0, 200.0, 0.005, 1, truth=train.truth)
    write_log(train.log, d / "train.parquet")
    r = invoke("identify", d / "train.parquet", "--robot", ROBOT, "--out", d / "fit", "--quiet",
               "--max-iterations", 15, "--friction", "coulomb-viscous-lead")
    assert r.exit_code == 0, r.output
    return {"dir": d, "model": d / "fit", "held": held, "truth": train.truth}


def _states(robot, n=25, seed=3):
    rng = np.random.default_rng(seed)
    lo, hi = robot.position_limits()
    q = rng.uniform(np.maximum(lo, -2.5), np.minimum(hi, 2.5), size=(n, robot.n_joints))
    v = rng.normal(0, 1.5, size=(n, robot.n_joints))
    a = rng.normal(0, 4.0, size=(n, robot.n_joints))
    return q, v, a


def _rel(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def _urdf_efforts(urdf, spec, q, v, a):
    """Efforts of an exported URDF loaded by Pinocchio (same joints locked) + the model's armature and
    the estimator's friction law with the URDF's <dynamics friction damping>."""
    exp = RobotModel.from_urdf(urdf, locked_joints=spec["robot"]["locked_joints"])
    assert list(exp.joint_names) == spec["robot"]["joints"]
    arm = np.array([spec["physical"][f"{j}.armature"] for j in exp.joint_names])
    data = exp.model.createData()
    out = np.empty_like(q)
    for k in range(q.shape[0]):
        out[k] = pin.rnea(exp.model, data, q[k], v[k], a[k])
    shape = dry_friction_shape(spec, exp.joint_names, v, a)
    return out + arm * a + exp.urdf_friction * shape + exp.urdf_damping * v, exp


def test_urdf_roundtrip_reproduces_identified_inverse_dynamics(fit, tmp_path):
    spec = load_model(fit["model"])
    params = identified_parameters(spec)
    robot = params.robot
    with pytest.warns(UserWarning, match="link06") if _whole_body(params) else _nullcontext():
        table = export_urdf(params, tmp_path / "z1.urdf")
    assert set(table["link"]) >= set(robot.body_names) | {"gripperStator", "gripperMover"}
    q, v, a = _states(robot)
    ref = predict_efforts(spec, robot, q, v, a)
    got, exp = _urdf_efforts(tmp_path / "z1.urdf", spec, q, v, a)
    assert _rel(got, ref) < REL_TOL
    np.testing.assert_allclose(exp.nominal_inertial_parameters(), params.inertial, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(exp.urdf_friction, params.fc, rtol=1e-12)
    np.testing.assert_allclose(exp.urdf_damping, params.fv, rtol=1e-12)


def _whole_body(params):
    import yourdfpy

    u = yourdfpy.URDF.load(str(params.robot.urdf_path), build_scene_graph=False, load_meshes=False,
                           build_collision_scene_graph=False, load_collision_meshes=False)
    _, table = urdf_inertials(params, u)
    return bool((table["role"] == "carrier (whole body)").any())


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _with_inertial(spec, robot, inertial):
    spec = json.loads(json.dumps(spec))
    for b, name in enumerate(robot.body_names):
        for k, s in enumerate(("m", "mcx", "mcy", "mcz", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")):
            spec["physical"][f"{name}.{s}"] = float(inertial[b, k])
    spec["layout"]["theta"] = None  # the physical values are the model now (predict maps them to θ)
    return spec


def test_urdf_export_of_nominal_model_gives_back_the_urdf_inertials(fit, tmp_path):
    """Remainder rule: with the URDF's own parameters every merged link keeps its inertial and the
    carrier gets exactly its own URDF inertial back."""
    import yourdfpy

    spec = load_model(fit["model"])
    robot = identified_parameters(spec).robot
    spec = _with_inertial(spec, robot, robot.nominal_inertial_parameters())
    params = identified_parameters(spec, robot)
    table = export_urdf(params, tmp_path / "nominal.urdf")
    assert set(table["role"]) == {"carrier", "merged: nominal kept"}
    src = {lk.name: lk.inertial for lk in yourdfpy.URDF.load(str(robot.urdf_path), load_meshes=False,
                                                               build_scene_graph=False).robot.links}
    out = {lk.name: lk.inertial for lk in yourdfpy.URDF.load(str(tmp_path / "nominal.urdf"),
                                                              load_meshes=False,
                                                              build_scene_graph=False).robot.links}
    for name in ("link02", "link06", "gripperStator", "gripperMover"):
        assert out[name].mass == pytest.approx(src[name].mass, rel=1e-9)
        np.testing.assert_allclose(out[name].origin[:3, 3], src[name].origin[:3, 3], atol=1e-9)
        R = src[name].origin[:3, :3]
        np.testing.assert_allclose(out[name].inertia, R @ src[name].inertia @ R.T, atol=1e-10)


def test_urdf_whole_body_fallback_when_remainder_is_not_physical(fit, tmp_path):
    """A link06 body lighter than the URDF's gripper: everything goes onto link06, merged links are
    cleared, with a warning naming them; Pinocchio still reproduces the identified dynamics."""
    spec = load_model(fit["model"])
    robot = identified_parameters(spec).robot
    P = robot.nominal_inertial_parameters()
    P[-1] *= 0.3  # scaling all 10 parameters keeps the body physically consistent
    spec = _with_inertial(spec, robot, P)
    params = identified_parameters(spec, robot)
    with pytest.warns(UserWarning, match=r"gripperStator.*gripperMover"):
        table = export_urdf(params, tmp_path / "light.urdf")
    roles = dict(zip(table["link"], table["role"], strict=True))
    assert roles["link06"] == "carrier (whole body)" and roles["gripperMover"] == "merged: cleared"
    q, v, a = _states(robot, seed=5)
    got, _ = _urdf_efforts(tmp_path / "light.urdf", spec, q, v, a)
    assert _rel(got, predict_efforts(spec, robot, q, v, a)) < REL_TOL


@pytest.mark.filterwarnings("ignore:export. joint:UserWarning")  # lead T <= 0 or d out of range
def test_mjcf_roundtrip_reproduces_identified_inverse_dynamics(fit, tmp_path):
    spec = load_model(fit["model"])
    params = identified_parameters(spec)
    robot = params.robot
    export_mjcf(params, tmp_path / "z1.xml")
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "z1.xml"))
    jid = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in robot.joint_names]
    dadr, qadr = m.jnt_dofadr[jid], m.jnt_qposadr[jid]
    np.testing.assert_allclose(m.dof_frictionloss[dadr], params.fc, rtol=1e-12)
    np.testing.assert_allclose(m.dof_damping[dadr], params.fv, rtol=1e-12)
    np.testing.assert_allclose(m.dof_armature[dadr], params.armature, rtol=1e-12)
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)  # frictionloss is a constraint
    d = mujoco.MjData(m)
    q, v, a = _states(robot, seed=7)
    got = np.empty_like(q)
    for k in range(q.shape[0]):
        d.qpos[qadr], d.qvel[dadr], d.qacc[dadr] = q[k], v[k], a[k]
        mujoco.mj_inverse(m, d)
        got[k] = d.qfrc_inverse[dadr]  # M(q) a (armature included) + bias + damping·v
    dry = params.fc * dry_friction_shape(spec, robot.joint_names, v, a)
    ref = predict_efforts(spec, robot, q, v, a) - dry
    assert _rel(got, ref) < REL_TOL  # Coulomb checked above


def test_mjcf_roundtrip_of_identified_lead_law(fit, tmp_path):
    """The identified coulomb-viscous-lead model: every joint whose lead MuJoCo can represent gets the
    friction loss fc·clip((v + T·a)/vs) (constraints on, sticking and sliding states); the others keep
    MuJoCo's defaults and are exactly the joints the warnings name."""
    spec = load_model(fit["model"])
    params = identified_parameters(spec)
    robot = params.robot
    assert params.friction_model == "coulomb-viscous-lead" and params.lead is not None
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        export_mjcf(params, tmp_path / "z1.xml")
    warned = {j for j in robot.joint_names for w in rec if f"export: joint {j!r}" in str(w.message)}
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "z1.xml"))
    q, v, a = _lead_states(robot, params.lead, params.vs, seed=8)
    _, fric, dadr = _mj_inverse(m, robot, q, v, a)
    default = np.all(m.dof_solref[dadr] == DEFAULT_SOLREF, axis=1)
    assert warned == {j for j, dflt in zip(robot.joint_names, default, strict=True) if dflt}
    mapped = ~default
    assert mapped.sum() >= 3
    u = (v + params.lead * a) / params.vs
    assert 0.3 < np.mean(np.abs(u[:, mapped]) < 1) < 0.7
    err = fric[:, mapped] - params.fc[mapped] * np.clip(u[:, mapped], -1, 1)
    assert np.max(np.abs(err)) < 1e-9 * params.fc.max()


@pytest.mark.filterwarnings("ignore:export. joint:UserWarning")  # lead T <= 0 or d out of range
def test_mujoco_rollout_of_export_tracks_heldout_log(fit, tmp_path):
    """Held-out log of the same robot, feed-forward logged efforts + weak PD (2 Hz): the exported model
    tracks far better than the nominal URDF; the truth tracks to the noise level (harness check)."""
    spec = load_model(fit["model"])
    params = identified_parameters(spec)
    robot = params.robot
    export_mjcf(params, tmp_path / "z1.xml")
    log = fit["held"].log
    tr = truth_arrays(fit["truth"], robot)
    rms = {}
    for name, m in (("export", mujoco.MjModel.from_xml_path(str(tmp_path / "z1.xml"))),
                    ("nominal", build_mujoco_spec(robot).compile()),
                    ("truth", build_mujoco_spec(robot, tr["inertial"], (tr["fc"], tr["fv"]),
                                                tr["armature"]).compile())):
        rms[name] = track_log(m, robot.joint_names, log.t, log.q, log.v, log.tau)["rms_overall"]
    assert rms["truth"] < 0.02, rms  # noise σ = 0.005 rad on the logged q used as reference
    assert rms["export"] < 0.5 * rms["nominal"], rms


@pytest.mark.parametrize("case", ["no_model", "urdf_missing", "unwritable", "nothing", "inconsistent",
                                  "negative_friction"])
def test_export_bad_input_exit_2_without_output(fit, tmp_path, case):
    model = fit["model"]
    out_urdf, out_xml = tmp_path / "o" / "r.urdf", tmp_path / "o" / "r.xml"
    args = ["--urdf", out_urdf, "--mjcf", out_xml]
    if case == "no_model":
        model = tmp_path / "empty"
        model.mkdir()
        expect = "model.json: not found"
    elif case == "urdf_missing":
        spec = load_model(model)
        spec["robot"]["source"] = str(tmp_path / "gone.urdf")
        model = tmp_path / "m"
        model.mkdir()
        (model / "model.json").write_text(json.dumps(spec))
        expect = "gone.urdf"
    elif case == "unwritable":
        (tmp_path / "o").mkdir()
        (tmp_path / "o" / "file").write_text("x")
        args = ["--urdf", tmp_path / "o" / "r.urdf", "--mjcf", tmp_path / "o" / "file" / "r.xml"]
        expect = "cannot write"
    elif case == "nothing":
        args = []
        expect = "nothing to export"
    elif case == "negative_friction":  # Pinocchio's URDF parser refuses friction < 0
        spec = load_model(model)
        spec["physical"]["joint2.fc"] = -0.25
        model = tmp_path / "m"
        model.mkdir()
        (model / "model.json").write_text(json.dumps(spec))
        expect = "joint 'joint2' has fc = -0.25 < 0"
    else:  # a negative mass cannot be a MuJoCo model: the URDF must not be written either
        spec = load_model(model)
        spec["physical"]["link03.m"] = -1.0
        model = tmp_path / "m"
        model.mkdir()
        (model / "model.json").write_text(json.dumps(spec))
        expect = "body 'link03' (mass -1 kg) is not physically consistent"
    r = invoke("export", model, *args)
    assert r.exit_code == 2, r.output
    assert "error:" in r.output and expect in r.output, r.output
    assert "Traceback" not in r.output
    o = tmp_path / "o"
    assert not o.exists() or sorted(p.name for p in o.iterdir()) in ([], ["file"])


def test_programmatic_robot_has_no_urdf():
    robot = load_robot("scara")
    params = identified_parameters({"layout": {"friction_model": "coulomb-viscous"}, "physical": {
        n: 0.1 for n in robot.parameter_names()}}, robot)
    with pytest.raises(ExportError, match="no URDF"):
        export_urdf(params, "/nonexistent/x.urdf")


def test_cli_export_writes_both(fit, tmp_path):
    r = invoke("export", fit["model"], "--urdf", tmp_path / "a.urdf", "--mjcf", tmp_path / "a.xml")
    assert r.exit_code == 0, r.output
    assert "armature is not part of URDF" in r.output
    pin.buildModelFromUrdf(str(tmp_path / "a.urdf"))
    assert mujoco.MjModel.from_xml_path(str(tmp_path / "a.xml")).nu == 6


def test_floating_base_export_urdf_and_mjcf(tmp_path):
    """B1 (free flyer): the URDF reloads with the same body inertias, the MJCF has the free joint, the
    feet and the same body masses and joint dynamics."""
    robot = load_robot("b1")
    P = robot.nominal_inertial_parameters()
    P[0] *= 1.1  # a heavier base body: the remainder goes onto the root link
    names = robot.parameter_names()
    values = np.concatenate([P.ravel(), np.tile([0.3, 0.02], robot.n_joints), np.full(robot.n_joints, 0.01)])
    spec = {"robot": {"source": "b1", "joints": list(robot.joint_names), "locked_joints": {}},
            "layout": {"friction_model": "coulomb-viscous", "friction_velocity_scale": 0.05},
            "physical": dict(zip(names, values.tolist(), strict=True))}
    params = identified_parameters(spec, robot)
    export_urdf(params, tmp_path / "b1.urdf")
    back = RobotModel.from_urdf(tmp_path / "b1.urdf", floating_base=True)
    np.testing.assert_allclose(back.nominal_inertial_parameters(), P, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(back.urdf_friction, 0.3)
    export_mjcf(params, tmp_path / "b1.xml")
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "b1.xml"))
    assert m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE and m.nu == robot.n_joints
    feet = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"{f}_geom") for f in robot.contact_frames]
    assert min(feet) >= 0
    np.testing.assert_allclose(m.body_mass[1:], P[:, 0], rtol=1e-12)
    np.testing.assert_allclose(m.dof_armature[6:], 0.01)


# ---------------------------------------------------------------------------------------------- lead laws
#: per joint (fc [N·m], fv [N·m·s/rad], vs [rad/s], lead T [s]) of the lead-law tests
LEAD_FRICTION = np.column_stack([np.linspace(0.5, 2.0, 6), np.linspace(0.05, 0.3, 6),
                                 np.linspace(0.02, 0.2, 6), np.linspace(0.004, 0.03, 6)])
DEFAULT_SOLREF, DEFAULT_SOLIMP = [0.02, 1.0], [0.9, 0.95, 0.001, 0.5, 2.0]


def _lead_spec(law="soft-dry", **edits):
    """A model.json dict of the z1 (URDF inertias, raw layout so θ = physical exactly) with the friction
    law ``law`` (its leading columns of LEAD_FRICTION) and armature 0.02; ``edits`` {name: value} (``.``
    as ``__``) override physical values."""
    from fg_sysid.layout import ParameterLayout

    robot = load_robot(ROBOT)
    layout = ParameterLayout.create(robot, "raw", law)
    fric = LEAD_FRICTION[:, :layout.kf]  # (fc, fv[, vs[, T]])
    p = np.concatenate([robot.nominal_inertial_parameters().ravel(), fric.ravel(),
                        np.full(robot.n_joints, 0.02)])
    spec = {"format": "fg-sysid-model", "robot": {"source": ROBOT, "joints": list(robot.joint_names),
                                                  "locked_joints": dict(robot.locked_joints)},
            "layout": {"inertia_parameterization": "raw", "friction_model": law,
                       "friction_velocity_scale": 0.05, "names": list(layout.names), "theta": None,
                       "actuation": []},
            "physical": dict(zip(layout.names, p.tolist(), strict=True))}
    spec["physical"].update({k.replace("__", "."): v for k, v in edits.items()})
    return spec, robot


def _mj_inverse(m, robot, q, v, a):
    """MuJoCo inverse dynamics (constraints on: the friction loss is in) and the friction-loss torque
    −qfrc_constraint, per robot joint."""
    jid = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in robot.joint_names]
    dadr, qadr = m.jnt_dofadr[jid], m.jnt_qposadr[jid]
    d = mujoco.MjData(m)
    tau, fric = np.empty_like(q), np.empty_like(q)
    for k in range(q.shape[0]):
        d.qpos[qadr], d.qvel[dadr], d.qacc[dadr] = q[k], v[k], a[k]
        mujoco.mj_inverse(m, d)
        tau[k], fric[k] = d.qfrc_inverse[dadr], -d.qfrc_constraint[dadr]
    return tau, fric, dadr


def _lead_states(robot, T=LEAD_FRICTION[:, 3], vs=LEAD_FRICTION[:, 2], n=40, seed=11):
    """Random states with about half the joint samples inside the stick band |v + T·a| < vs."""
    rng = np.random.default_rng(seed)
    q, v, a = _states(robot, n, seed)
    stick = rng.random(q.shape) < 0.5
    v = np.where(stick, rng.uniform(-0.9, 0.9, q.shape) * vs - T * a, v)
    return q, v, a


def test_mjcf_soft_dry_export_reproduces_identified_inverse_dynamics(tmp_path):
    """soft-dry: per-joint solreffriction/solimpfriction make MuJoCo's friction loss (mj_inverse with
    constraints on) the identified fc·clip((v + T·a)/vs), sticking and sliding, to round-off."""
    spec, robot = _lead_spec()
    params = identified_parameters(spec, robot)
    np.testing.assert_array_equal(params.vs, LEAD_FRICTION[:, 2])
    np.testing.assert_array_equal(params.lead, LEAD_FRICTION[:, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every joint is representable
        export_mjcf(params, tmp_path / "z1.xml")
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "z1.xml"))
    q, v, a = _lead_states(robot)
    tau, fric, dadr = _mj_inverse(m, robot, q, v, a)
    fc, _, vs, T = LEAD_FRICTION.T
    u = (v + T * a) / vs
    assert 0.3 < np.mean(np.abs(u) < 1) < 0.7  # both regimes are exercised
    np.testing.assert_allclose(m.dof_solimp[dadr, 0], m.dof_solimp[dadr, 1], rtol=0)  # constant impedance
    assert np.max(np.abs(fric - fc * np.clip(u, -1, 1))) < 1e-9 * fc.max()
    ref = predict_efforts(spec, robot, q, v, a)
    assert np.max(np.abs(tau - ref)) < REL_TOL * np.max(np.abs(ref))


def test_mjcf_tanh_lead_law_exports_the_clip_of_the_same_width(tmp_path):
    """coulomb-viscous-lead gets soft-dry's solref/solimp: MuJoCo's clip differs from the identified tanh
    by exactly fc·(clip(u) − tanh(u)), at most fc·(1 − tanh 1) (docs/export.md)."""
    spec, robot = _lead_spec("coulomb-viscous-lead")
    export_mjcf(identified_parameters(spec, robot), tmp_path / "tanh.xml")
    export_mjcf(identified_parameters(*_lead_spec()), tmp_path / "clip.xml")
    m, m_clip = (mujoco.MjModel.from_xml_path(str(tmp_path / f)) for f in ("tanh.xml", "clip.xml"))
    np.testing.assert_array_equal(m.dof_solref, m_clip.dof_solref)
    np.testing.assert_array_equal(m.dof_solimp, m_clip.dof_solimp)
    q, v, a = _lead_states(robot, seed=12)
    tau, _, _ = _mj_inverse(m, robot, q, v, a)
    fc, _, vs, T = LEAD_FRICTION.T
    u = (v + T * a) / vs
    gap = tau - predict_efforts(spec, robot, q, v, a)
    assert np.max(np.abs(gap - fc * (np.clip(u, -1, 1) - np.tanh(u)))) < 1e-9 * np.max(np.abs(tau))
    assert np.all(np.abs(gap) <= fc * (1 - np.tanh(1.0)) + 1e-9)


@pytest.mark.parametrize("case, edits, why", [
    pytest.param("lag", {"joint3__lead": -0.004}, r"lead T = -0\.004 s <= 0", id="lag"),
    pytest.param("zero_lead", {"joint3__lead": 0.0}, r"lead T = 0 s <= 0", id="zero_lead"),
    pytest.param("impedance", {"joint3__vs": 1e-9}, r"impedance d = .* outside MuJoCo's \[0\.0001, 0\.9999\]",
                 id="impedance"),
    pytest.param("timeconst", {"joint3__vs": 1e-4, "joint3__lead": 1e-5},
                 r"timeconst 2·T/d = .* below .* minimum", id="timeconst"),
])
def test_mjcf_lead_law_not_representable_keeps_default_and_warns(tmp_path, case, edits, why):
    """A joint whose lead law MuJoCo cannot represent keeps MuJoCo's default solreffriction/solimpfriction
    (and frictionloss = fc), with one warning naming it and why; the other joints are mapped."""
    from fg_sysid.export import lead_friction_solref_solimp

    spec, robot = _lead_spec(**edits)
    with pytest.warns(UserWarning, match=r"joint 'joint3'.*" + why) as rec:
        export_mjcf(identified_parameters(spec, robot), tmp_path / "z1.xml")
    assert sum("export: joint" in str(w.message) for w in rec) == 1
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "z1.xml"))
    dadr = [m.jnt_dofadr[m.joint(j).id] for j in robot.joint_names]
    np.testing.assert_array_equal(m.dof_solref[dadr[2]], DEFAULT_SOLREF)
    np.testing.assert_array_equal(m.dof_solimp[dadr[2]], DEFAULT_SOLIMP)
    assert m.dof_frictionloss[dadr[2]] == LEAD_FRICTION[2, 0]
    others = [dadr[i] for i in range(robot.n_joints) if i != 2]
    assert np.all(m.dof_solimp[others, 0] == m.dof_solimp[others, 1])
    assert not np.any(np.all(m.dof_solref[others] == DEFAULT_SOLREF, axis=1))
    if case == "timeconst":  # without MuJoCo's refsafe floor the same joint is representable
        solref, _, reason = lead_friction_solref_solimp(LEAD_FRICTION[2, 0], 1e-4, 1e-5,
                                                        m.dof_invweight0[dadr[2]], m.opt.timestep,
                                                        refsafe=False)
        assert reason is None and solref[0] < 2 * m.opt.timestep


def test_mjcf_export_of_velocity_laws_keeps_default_friction_solver_parameters(tmp_path):
    """coulomb-viscous(-scale) and stribeck6 exports carry no lead: no solreffriction/solimpfriction in the
    file, MuJoCo's defaults; a lead law without its per-joint lead is refused."""
    for law in ("coulomb-viscous", "coulomb-viscous-scale"):
        spec, robot = _lead_spec(law)
        params = identified_parameters(spec, robot)
        assert params.vs is None and params.lead is None
        export_mjcf(params, tmp_path / f"{law}.xml")
        text = (tmp_path / f"{law}.xml").read_text()
        assert "solreffriction" not in text and "solimpfriction" not in text
        m = mujoco.MjModel.from_xml_path(str(tmp_path / f"{law}.xml"))
        np.testing.assert_array_equal(m.dof_solref, np.tile(DEFAULT_SOLREF, (m.nv, 1)))
        np.testing.assert_array_equal(m.dof_solimp, np.tile(DEFAULT_SOLIMP, (m.nv, 1)))
    spec, robot = _lead_spec()
    del spec["physical"]["joint4.lead"]
    with pytest.raises(ExportError, match="joint4.lead"):
        identified_parameters(spec, robot)

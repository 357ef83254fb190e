"""Robot spec files (YAML): parsing, validation messages, catalog metadata, CLI `--robot spec.yaml`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from fg_sysid.cli import main
from fg_sysid.factors.parameter_priors import SymmetryMap
from fg_sysid.robots import RobotError, RobotModel, RobotSpec, load_robot, load_spec
from fg_sysid.robots.catalog import resolve_catalog

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FEET = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")


@pytest.fixture(scope="module")
def b1_urdf() -> Path:
    return resolve_catalog("b1")[0]


@pytest.fixture(scope="module")
def b1() -> RobotModel:
    return load_robot("b1")


def write(tmp_path: Path, data, name: str = "robot.yaml") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return p


def urdf_spec(b1_urdf: Path, **extra) -> dict:
    d = {"urdf": str(b1_urdf), "base": "floating", "imu_frame": "imu_link",
         "contacts": [{"frame": f, "type": "point"} for f in FEET], "contact_radius": 0.02,
         "symmetry": {"pairs": [["FL_", "FR_"], ["RL_", "RR_"]], "plane": "xz"}}
    d.update(extra)
    return d


# ---------------------------------------------------------------------- catalog metadata
def test_b1_catalog_carries_contacts_imu_symmetry(b1):
    assert b1.contact_frames == FEET
    assert b1.contact_types == ("point",) * 4
    assert b1.contact_radius == 0.02
    assert b1.imu_frame == "imu_link"
    assert b1.symmetry_pairs == (("FL_", "FR_"), ("RL_", "RR_"))
    sm = b1.symmetry_map()
    assert isinstance(sm, SymmetryMap) and len(sm.body_pairs) == 6 and len(sm.joint_pairs) == 6
    assert sm.plane == "xz"
    text = b1.describe()
    assert "contacts: FL_foot (point)" in text and "imu: imu_link" in text and "radius 0.02" in text
    b1z1 = load_robot("b1_z1")
    assert b1z1.contact_frames == FEET and b1z1.imu_frame == "imu_link"
    assert b1z1.symmetry_map() is not None


def test_fixed_arm_has_no_metadata():
    z1 = load_robot("z1")
    assert z1.contact_frames == () and z1.imu_frame is None and z1.symmetry_map() is None
    assert z1.joint_friction_models() == ("coulomb-viscous",) * z1.n_joints
    assert z1.total_mass is None and z1.spec_path is None


def test_lock_preserves_metadata(b1_urdf, tmp_path):
    spec = urdf_spec(b1_urdf, friction={"default": "viscous", "joints": {"FL_hip_joint": "none"}},
                     total_mass=55.0)
    r = load_robot(write(tmp_path, spec))
    locked = r.lock({"RR_calf_joint": -1.0})
    for f in ("contact_frames", "contact_types", "contact_radius", "imu_frame", "symmetry_pairs",
              "symmetry_plane", "total_mass", "spec_path", "name"):
        assert getattr(locked, f) == getattr(r, f), f
    assert locked.n_joints == r.n_joints - 1
    assert locked.friction_models == tuple(
        "none" if j == "FL_hip_joint" else "viscous" for j in locked.joint_names)
    assert "RR_calf_joint" not in locked.joint_names
    # catalog metadata also survives lock
    b1l = load_robot("b1").lock(["FL_hip_joint"])
    assert b1l.contact_frames == FEET and b1l.imu_frame == "imu_link" and b1l.contact_radius == 0.02


# ---------------------------------------------------------------------- spec files
def test_urdf_spec_matches_catalog(b1, b1_urdf, tmp_path):
    r = load_robot(write(tmp_path, urdf_spec(b1_urdf), "my_quad.yaml"))
    assert r.name == "my_quad"  # file stem
    assert (r.nq, r.nv) == (b1.nq, b1.nv)
    assert r.joint_names == b1.joint_names and r.body_names == b1.body_names
    assert r.floating_base
    np.testing.assert_allclose(r.nominal_inertial_parameters(), b1.nominal_inertial_parameters())
    for f in ("contact_frames", "contact_types", "contact_radius", "imu_frame", "symmetry_pairs"):
        assert getattr(r, f) == getattr(b1, f), f
    assert r.spec_path == tmp_path / "my_quad.yaml"
    assert r.symmetry_map() == b1.symmetry_map()


def test_relative_urdf_path_and_example_file(b1, b1_urdf, tmp_path):
    shutil.copy(b1_urdf, tmp_path / "b1.urdf")
    shutil.copy(EXAMPLES / "quadruped_from_urdf.yaml", tmp_path / "quad.yaml")
    r = load_robot(str(tmp_path / "quad.yaml"))
    assert r.name == "my_quadruped" and r.joint_names == b1.joint_names
    assert r.urdf_path == tmp_path / "b1.urdf"
    assert r.total_mass == pytest.approx(55.7)
    fm = dict(zip(r.joint_names, r.joint_friction_models(), strict=True))
    assert fm["FL_hip_joint"] == fm["FR_hip_joint"] == "viscous" and fm["RL_calf_joint"] == "coulomb-viscous"


def test_example_b1_spec():
    r = load_robot(EXAMPLES / "b1_spec.yaml")
    b1 = load_robot("b1")
    assert r.name == "b1" and r.joint_names == b1.joint_names and r.contact_frames == FEET
    assert r.imu_frame == "imu_link" and r.symmetry_pairs == b1.symmetry_pairs
    assert r.spec_path == EXAMPLES / "b1_spec.yaml"


def test_catalog_spec_inherits_and_overrides(tmp_path):
    p = write(tmp_path, {"catalog": "b1", "name": "b1_flat",
                         "contacts": [{"frame": "FL_foot", "type": "6d"}, "FR_foot"], "contact_radius": 0.0})
    r = load_robot(p)
    assert r.name == "b1_flat"
    assert r.contact_frames == ("FL_foot", "FR_foot") and r.contact_types == ("6d", "point")
    assert r.contact_radius == 0.0
    assert r.imu_frame == "imu_link" and r.symmetry_pairs  # inherited from the catalog
    assert "FL_foot (6d)" in r.describe()


def test_catalog_spec_locked_joints(tmp_path):
    r = load_robot(write(tmp_path, {"catalog": "z1", "locked_joints": {"jointGripper": 0.3}}))
    assert r.locked_joints == {"jointGripper": 0.3} and r.n_joints == 6
    r = load_robot(write(tmp_path, {"catalog": "z1_gripper", "locked_joints": {"jointGripper": None}}))
    assert r.locked_joints == {"jointGripper": 0.0} and "jointGripper" not in r.joint_names
    # keyword overrides through load_robot (as the CLI's --floating-base does)
    r = load_robot(write(tmp_path, {"catalog": "z1"}), floating_base=True)
    assert r.floating_base and r.nv == 12


def test_round_trip(b1_urdf, tmp_path):
    friction = {"default": "coulomb-viscous", "joints": {"FL_hip_joint": "none", "FR_hip_joint": "viscous"}}
    locks = {"RL_calf_joint": -1.2, "RR_calf_joint": -1.2}  # both sides: the symmetry stays valid
    d = urdf_spec(b1_urdf, name="quad", friction=friction, locked_joints=locks, total_mass=55.0)
    d["contacts"][3]["type"] = "6d"
    spec = load_spec(write(tmp_path, d))
    sub = tmp_path / "sub"
    sub.mkdir()
    saved = spec.save(sub / "copy.yaml")
    raw = yaml.safe_load(saved.read_text())
    assert not Path(raw["urdf"]).is_absolute()  # written relative to the new file
    again = RobotSpec.from_file(saved)
    assert again == spec
    r1, r2 = spec.build(), again.build()
    assert r1.joint_names == r2.joint_names and r1.locked_joints == r2.locked_joints == locks
    assert r1.symmetry_map() == r2.symmetry_map() and len(r1.symmetry_map().body_pairs) == 5
    for f in ("contact_frames", "contact_types", "contact_radius", "imu_frame", "symmetry_pairs",
              "symmetry_plane", "friction_models", "total_mass"):
        assert getattr(r1, f) == getattr(r2, f), f
    # from_dict(to_dict) without a file
    assert RobotSpec.from_dict(spec.to_dict()) == spec
    cat = RobotSpec.from_dict({"catalog": "b1", "name": "x"})
    assert RobotSpec.from_dict(cat.to_dict()) == cat


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize("change, needles", [
    ({"colour": "red"}, ["unknown key", "colour"]),
    ({"urdf": None}, ["missing key 'urdf'", "catalog"]),
    ({"urdf": "nope.urdf"}, ["key 'urdf'", "nope.urdf", "not found"]),
    ({"catalog": "b1"}, ["either key 'urdf' or key 'catalog'"]),
    ({"base": "wheeled"}, ["key 'base'", "wheeled", "floating, fixed"]),
    ({"base": None}, ["missing key 'base'"]),
    ({"imu_frame": "imu"}, ["key 'imu_frame'", "'imu'", "not in the model", "imu_link"]),
    ({"contacts": [{"frame": "FL_toe"}]}, ["key 'contacts[0].frame'", "FL_toe", "not in the model"]),
    ({"contacts": [{"frame": "FL_foot", "type": "3d"}]}, ["key 'contacts[0].type'", "'3d'", "point, 6d"]),
    ({"contacts": [{"frame": "FL_foot", "kind": "point"}]}, ["key 'contacts[0]'", "kind"]),
    ({"contacts": ["FL_foot", "FL_foot"]}, ["key 'contacts'", "more than once"]),
    ({"contact_radius": -0.1}, ["key 'contact_radius'", ">= 0"]),
    ({"contact_radius": "2cm"}, ["key 'contact_radius'", "2cm"]),
    ({"symmetry": {"pairs": [["FL_", "FX_"]]}}, ["key 'symmetry.pairs'", "'FX_'", "matches no"]),
    ({"symmetry": {"pairs": [["LF_", "RF_"]]}}, ["key 'symmetry.pairs'", "'LF_'", "matches no"]),
    ({"symmetry": {"pairs": [["FL_"]]}}, ["key 'symmetry.pairs[0]'"]),
    ({"symmetry": {"pairs": [["FL_", "FR_"]], "plane": "xy2"}}, ["key 'symmetry.plane'", "xy2"]),
    ({"symmetry": {"pairs": [["FL_", "FR_"]], "mirror": 1}}, ["key 'symmetry'", "mirror"]),
    ({"symmetry": {"pairs": [["FL_calf", "base"]]}}, ["symmetry", "no mirrored partner", "base_joint"]),
    ({"friction": {"joints": {"FL_knee": "none"}}}, ["key 'friction.joints'", "FL_knee"]),
    ({"friction": {"joints": {"FL_hip_joint": "stribeck"}}},
     ["key 'friction.joints.FL_hip_joint'", "stribeck"]),
    ({"friction": {"default": "dahl"}}, ["key 'friction.default'", "dahl", "coulomb-viscous, viscous, none"]),
    ({"friction": {"model": "none"}}, ["key 'friction'", "model"]),
    ({"locked_joints": {"FL_knee": 0.0}}, ["key 'locked_joints'", "FL_knee"]),
    ({"locked_joints": {"FL_hip_joint": "zero"}}, ["key 'locked_joints.FL_hip_joint'", "zero"]),
    ({"locked_joints": {"FL_hip_joint": 0.0}, "friction": {"joints": {"FL_hip_joint": "none"}}},
     ["key 'friction.joints'", "FL_hip_joint", "is locked"]),
    ({"total_mass": 0}, ["key 'total_mass'", "> 0"]),
    ({"total_mass": True}, ["key 'total_mass'"]),
    ({"name": 3}, ["key 'name'"]),
])
def test_errors_name_file_and_key(b1_urdf, tmp_path, change, needles):
    d = urdf_spec(b1_urdf)
    for k, v in change.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    p = write(tmp_path, d, "bad_robot.yaml")
    with pytest.raises(RobotError) as ei:
        load_robot(p)
    msg = str(ei.value)
    assert msg.startswith(str(p)), msg
    for n in needles:
        assert n in msg, (n, msg)


def test_catalog_and_file_errors(tmp_path):
    with pytest.raises(RobotError, match=r"key 'catalog': unknown robot 'b2'.*b1"):
        load_robot(write(tmp_path, {"catalog": "b2"}))
    with pytest.raises(RobotError, match="robot spec file not found"):
        load_robot(tmp_path / "missing.yaml")
    with pytest.raises(RobotError, match="not valid YAML"):
        load_robot(write(tmp_path, "contacts: [FL_foot\n"))
    with pytest.raises(RobotError, match="expected a mapping"):
        load_robot(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(RobotError, match="missing key 'urdf'"):
        load_robot(write(tmp_path, ""))
    # locking one leg of a mirrored pair breaks the symmetry map: the error names the lonely body
    with pytest.raises(RobotError, match="symmetry.*'RR_calf'"):
        load_robot(write(tmp_path, {"catalog": "b1", "locked_joints": {"RL_calf_joint": 0.0}}))
    # ... unless the spec drops the catalog's symmetry (and contacts)
    p = write(tmp_path, "catalog: b1\nlocked_joints: {RL_calf_joint: 0.0}\nsymmetry: null\ncontacts: []\n")
    r = load_robot(p)
    assert r.symmetry_map() is None and r.contact_frames == () and r.imu_frame == "imu_link"
    spec = load_spec(p)
    assert RobotSpec.from_dict(spec.to_dict()) == spec


def test_with_metadata_validates(b1):
    with pytest.raises(RobotError, match="frame 'nope'"):
        b1.with_metadata(imu_frame="nope")
    with pytest.raises(RobotError, match="unknown contact type"):
        b1.with_metadata(contact_frames=["FL_foot"], contact_types=["line"])
    with pytest.raises(TypeError):
        b1.with_metadata(name="x")
    r = b1.with_metadata(contact_frames=["FL_foot"], total_mass=55.0)
    assert r.contact_types == ("point",) and r.total_mass == 55.0 and b1.total_mass is None


# ---------------------------------------------------------------------- CLI
def test_cli_robots_and_identifiability_with_spec(b1_urdf, tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["robots"])
    assert res.exit_code == 0 and "b1 " in res.output and "z1 " in res.output
    p = write(tmp_path, urdf_spec(b1_urdf), "quad.yaml")
    res = runner.invoke(main, ["robots", str(p)])
    assert res.exit_code == 0, res.output
    assert "robot quad:" in res.output and "contacts: FL_foot (point)" in res.output
    res = runner.invoke(main, ["identifiability", "--robot", str(p), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    ref = json.loads(runner.invoke(main, ["identifiability", "--robot", "b1", "--json"]).output)
    assert out["robot"] == "quad" and out["floating_base"] is True
    assert out["identifiable"] == ref["identifiable"] and out["parameters"] == ref["parameters"]
    bad = write(tmp_path, urdf_spec(b1_urdf, base="wheeled"), "bad.yaml")
    res = runner.invoke(main, ["identifiability", "--robot", str(bad)])
    assert res.exit_code == 2 and "key 'base'" in res.output and "wheeled" in res.output

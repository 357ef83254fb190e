"""Shared CLI pieces: the click group, the exit-2 error path, atomic output directories."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import click
import numpy as np

from .. import __version__

EXIT_BAD_INPUT = 2


class UserError(click.ClickException):
    """Bad input: printed as one line ``error: ...`` and exit code 2."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file=None):
        click.echo(f"error: {self.format_message()}", err=True)


def _showwarning(message, category, filename, lineno, file=None, line=None):
    click.echo(f"warning: {message}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fg-sysid")
def main():
    """fg-sysid: identify a robot's physical parameters jointly with its state trajectory."""
    warnings.showwarning = _showwarning


@contextlib.contextmanager
def atomic_output_dir(out: str | os.PathLike):
    """Yield a temporary directory next to ``out``; on success it replaces ``out`` atomically.

    On any exception the temporary directory is removed and ``out`` is left untouched.
    """
    out = Path(out)
    parent = out.parent if str(out.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        backup = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=parent))
        shutil.rmtree(backup)
        out.rename(backup)
        tmp.rename(out)
        shutil.rmtree(backup, ignore_errors=True)
    else:
        tmp.rename(out)


@contextlib.contextmanager
def atomic_output_file(out: str | os.PathLike):
    """Yield a temporary file path next to ``out``; it is renamed onto ``out`` on success."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.tmp-", suffix=out.suffix, dir=out.parent)
    os.close(fd)
    try:
        yield Path(tmp)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    os.replace(tmp, out)


def fail(message: str):
    raise UserError(message)


def load_robot_or_fail(name_or_path, **kwargs):
    from ..robots import RobotError, load_robot

    try:
        return load_robot(name_or_path, **kwargs)
    except (RobotError, FileNotFoundError) as e:
        fail(str(e))


def echo_err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def json_safe(o):
    """JSON-safe copy: numpy -> Python, non-finite floats -> None, paths -> str."""
    if isinstance(o, dict):
        return {str(k): json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_safe(v) for v in o]
    if isinstance(o, np.ndarray):
        return json_safe(o.tolist())
    if isinstance(o, (np.floating, float)):
        x = float(o)
        return x if math.isfinite(x) else None
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.bool_,)):
        return bool(o)
    if isinstance(o, Path):
        return str(o)
    return o

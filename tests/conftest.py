"""Test-session settings shared by every test module."""
import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _one_thread_per_xdist_worker():
    """Under pytest-xdist every worker is already one of the cores: fits whose ``n_jobs`` is the default
    run on one thread and no knot-worker process there (tests of the two-thread paths pass 2 explicitly)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    from fg_sysid.estimation.linear_solver import default_threads

    with default_threads(1):
        yield

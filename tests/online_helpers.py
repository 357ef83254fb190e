"""Shared test helpers of the online estimators' tests: feeding a log in chunks, one BLAS thread."""

import pytest


def stream(est, log, chunk=5, start=0, stop=None):
    """``est.update`` on consecutive ``chunk``-sample slices of ``log[start:stop]``; yields each output."""
    stop = log.n_samples if stop is None else stop
    for i in range(start, stop, chunk):
        yield est.update(log.slice(i, min(i + chunk, stop)))


def feed(est, log, chunk=5, start=0, stop=None):
    """`stream` to the end; the last update's output (None when nothing was fed)."""
    out = None
    for out in stream(est, log, chunk, start, stop):  # noqa: B007 (the last one is kept)
        pass
    return out


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    """Small dense blocks: one BLAS thread (as the estimator's own updates use). Autouse in every test
    module that imports it."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield

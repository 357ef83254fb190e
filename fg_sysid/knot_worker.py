"""A second process for Pinocchio's per-knot derivative loop (issue 9, session 13).

The inverse-dynamics linearization calls Pinocchio twice per knot (RNEA derivatives and the joint-torque
regressor, ~15 µs per knot on the arms, most of it the Python call). Pinocchio's calls hold the GIL, so
threads cannot share that loop (measured: two threads take as long as one); a second process can. It
receives the model (pickled, ~20 kB: the current inertias travel with it) and a range of knots, reads
q, v, a from shared memory and writes ∂τ/∂q, ∂τ/∂v, M(q) and the regressor Y there, while the caller
computes the other half of the knots.

One worker per Python process, started on first use and stopped at exit: ``python -m fg_sysid.knot_worker``
(a clean interpreter importing numpy and Pinocchio only, ~0.4 s once — neither forked from a process
with threads nor re-running the caller's main script, as multiprocessing's ``fork`` / ``spawn`` would),
talking over a private socket pair. POSIX only (elsewhere the loop stays serial). `derivative_loop` is
the loop both sides run.
"""

from __future__ import annotations

import atexit
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
import warnings
from multiprocessing import shared_memory
from multiprocessing.connection import Connection

import numpy as np
import pinocchio as pin

__all__ = ["KnotWorker", "derivative_loop", "shared_worker", "worker_available", "worker_cpu_seconds"]


def derivative_loop(model, data, q, v, a, Jq, Jv, Ja, Y, lo: int, hi: int) -> None:
    """Knots lo … hi−1: ∂τ/∂q, ∂τ/∂v, ∂τ/∂a = M(q) (Pinocchio's RNEA derivatives) and the joint-torque
    regressor Y(q, v, a) (τ = Y π, π the bodies' dynamic parameters), written into Jq, Jv, Ja (N, nv, nv)
    and Y (N, nv, 10·n_bodies). q (N, nq), v and a (N, nv) [rad, rad/s, rad/s² | m, m/s, m/s²]."""
    for k in range(lo, hi):
        dq, dv, da = pin.computeRNEADerivatives(model, data, q[k], v[k], a[k])
        Jq[k] = dq
        Jv[k] = dv
        Ja[k] = da
        Y[k] = pin.computeJointTorqueRegressor(model, data, q[k], v[k], a[k])


def _views(buf, n: int, nq: int, nv: int, ny: int):
    """q (n, nq), v, a (n, nv), Jq, Jv, Ja (n, nv, nv), Y (n, nv, ny) laid out one after the other in
    ``buf``."""
    shapes = [(n, nq), (n, nv), (n, nv), (n, nv, nv), (n, nv, nv), (n, nv, nv), (n, nv, ny)]
    out, off = [], 0
    for s in shapes:
        size = int(np.prod(s))
        out.append(np.ndarray(s, dtype=float, buffer=buf, offset=8 * off))
        off += size
    return out


def _nbytes(n: int, nq: int, nv: int, ny: int) -> int:
    return 8 * n * (nq + 2 * nv + 3 * nv * nv + nv * ny)


def _serve(conn) -> None:  # pragma: no cover - runs in the worker process
    from multiprocessing import resource_tracker

    shm = None
    while True:
        try:
            msg = conn.recv()
        except EOFError:  # the caller has gone
            break
        if msg is None:
            break
        if msg == "cpu":  # this process's CPU time [s] (benchmarks count it with the caller's)
            conn.send(time.process_time())
            continue
        name, n, nq, nv, ny, model_bytes = msg
        try:
            if shm is None or shm.name != name:
                if shm is not None:
                    shm.close()
                shm = shared_memory.SharedMemory(name=name)
                # the caller owns the block: keep this process's tracker from unlinking it at exit
                resource_tracker.unregister(shm._name, "shared_memory")
            model = pickle.loads(model_bytes)
            q, v, a, Jq, Jv, Ja, Y = _views(shm.buf, n, nq, nv, ny)
            derivative_loop(model, model.createData(), q, v, a, Jq, Jv, Ja, Y, 0, n)
            del q, v, a, Jq, Jv, Ja, Y
            conn.send(None)
        except Exception as exc:  # reported to the caller, which raises it
            conn.send(f"{type(exc).__name__}: {exc}")
    if shm is not None:
        shm.close()


def worker_available() -> bool:
    """Whether this platform can run the worker (POSIX: a socket pair handed to the child)."""
    return os.name == "posix" and hasattr(socket, "socketpair")


class KnotWorker:
    """The worker process and the shared block it reads and writes (grown as needed). `run` is the one
    entry point: it holds a lock from filling the block to copying the results out, so callers in several
    threads take turns."""

    def __init__(self):
        mine, theirs = socket.socketpair()
        fd = theirs.fileno()
        self._proc = subprocess.Popen([sys.executable, "-m", "fg_sysid.knot_worker", str(fd)], pass_fds=(fd,),
                                      stdin=subprocess.DEVNULL)
        theirs.close()
        self._conn = Connection(mine.detach())
        self._shm = None
        self._lock = threading.Lock()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def run(self, model, q, v, a, local, out):
        """`derivative_loop` of ``model`` at knots (q, v, a) in the worker process while ``local()`` runs
        here; the worker's ∂τ/∂q, ∂τ/∂v, M, Y are copied into ``out`` = (Jq, Jv, Ja, Y) (arrays of those
        knots). Raises RuntimeError if the worker fails (the caller's ``local()`` has then still run)."""
        n, nq = q.shape
        nv = v.shape[1]
        ny = out[3].shape[2]
        with self._lock:
            if not self.alive():
                local()
                raise RuntimeError("the worker process has stopped")
            size = _nbytes(n, nq, nv, ny)
            if self._shm is None or self._shm.size < size:
                self._release()
                self._shm = shared_memory.SharedMemory(create=True, size=max(size, 1))
            qs, vs, as_, *results = _views(self._shm.buf, n, nq, nv, ny)
            qs[:], vs[:], as_[:] = q, v, a
            try:
                self._conn.send((self._shm.name, n, nq, nv, ny, pickle.dumps(model)))
            except OSError as exc:
                local()
                raise RuntimeError(f"the worker process is unreachable ({exc})") from None
            try:
                local()
            finally:
                try:
                    msg = self._conn.recv()
                except (EOFError, OSError):
                    msg = "the worker process stopped"
            if msg is not None:
                raise RuntimeError(msg)
            for dst, src in zip(out, results, strict=True):
                dst[...] = src

    def cpu_seconds(self) -> float:
        """CPU time [s] the worker process has used so far."""
        with self._lock:
            self._conn.send("cpu")
            return float(self._conn.recv())

    def _release(self) -> None:
        if self._shm is not None:
            self._shm.close()
            self._shm.unlink()
            self._shm = None

    def close(self) -> None:
        with self._lock:
            try:
                if self.alive():
                    self._conn.send(None)
                    self._proc.wait(timeout=5)
            except (OSError, EOFError, subprocess.TimeoutExpired):
                pass
            if self.alive():
                self._proc.kill()
            self._conn.close()
            self._release()


_WORKER: KnotWorker | None = None
_FAILED = False  # the worker could not be started here: stay serial


def shared_worker() -> KnotWorker | None:
    """This process's worker, started on first use (again if it stopped) and stopped at exit; None where
    it cannot run (not POSIX, or starting it failed once: a warning said why)."""
    global _WORKER, _FAILED
    if _FAILED or not worker_available():
        return None
    if _WORKER is None or not _WORKER.alive():
        try:
            _WORKER = KnotWorker()
        except OSError as exc:
            _FAILED = True
            warnings.warn(f"fg-sysid knot worker could not start ({exc}); the derivative loop runs serially",
                          RuntimeWarning, stacklevel=2)
            return None
        atexit.register(_WORKER.close)
    return _WORKER


def worker_cpu_seconds() -> float:
    """CPU time [s] of this process's worker so far (0 when none was started): add it to
    ``time.process_time()`` for a fit's whole CPU cost."""
    return _WORKER.cpu_seconds() if _WORKER is not None and _WORKER.alive() else 0.0


if __name__ == "__main__":  # pragma: no cover - the worker process
    _serve(Connection(int(sys.argv[1])))

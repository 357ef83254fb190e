"""The ``fg-sysid`` command line. Each command lives in its own module of this package.

Every command reports bad input as one line on stderr and exits with code 2 (`fail`), and writes
its outputs to a temporary location first, moving them into place only when complete.
"""

from __future__ import annotations

# Registering a command = importing its module (each module decorates a function with @main.command).
from . import demo as _demo  # noqa: E402,F401
from . import excite as _excite  # noqa: E402,F401
from . import export as _export  # noqa: E402,F401
from . import identifiability as _identifiability  # noqa: E402,F401
from . import identify as _identify  # noqa: E402,F401
from . import online as _online  # noqa: E402,F401  (issue 13)
from . import payload as _payload  # noqa: E402,F401  (issue 16)
from . import payload_excite as _payload_excite  # noqa: E402,F401  (issue 16)
from . import predict as _predict  # noqa: E402,F401
from . import robots as _robots  # noqa: E402,F401
from . import simulate as _simulate  # noqa: E402,F401
from . import study as _study  # noqa: E402,F401  (issue 12)
from .common import main  # noqa: F401  (the click group)

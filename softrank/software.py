"""What a producing run's floating-point results depend on, for a store's provenance.

Work-mode budgets make the brackets a function of the inputs and of the code that computes
them: the producers' sources, numpy and scipy, and the BLAS kernels that run their products.
OpenBLAS built with DYNAMIC_ARCH picks its kernels from the CPU at load time, and kernels for
different cores sum in different orders, so two machines with the same wheels can still write
different brackets.  Recording all of these lets a reader tell whether a rerun should match a
store bit for bit, and which ``OPENBLAS_CORETYPE`` reproduces it on another CPU.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import sys
from pathlib import Path
from typing import Any


def producer_sources_sha256() -> str:
    """Returns the sha256 of the ``witnesses`` package's Python sources (the producers and
    the store format): each file's path relative to the package, a NUL, its bytes, a NUL, in
    sorted path order.  Equal digests mean the same producing code, whatever the version
    number says."""
    from softrank import witnesses

    root = Path(witnesses.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def _blas() -> list[dict[str, str]]:
    """The BLAS libraries loaded in this process, as threadpoolctl reports them (library,
    version, the kernel architecture chosen at load time)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return []
    out = []
    for lib in threadpool_info():
        if lib.get("user_api") != "blas":
            continue
        out.append({k: str(lib[k]) for k in ("internal_api", "version", "architecture")
                    if lib.get(k) is not None})
    return sorted(out, key=lambda d: sorted(d.items()))


def numerics_environment() -> dict[str, Any]:
    """Returns the software a producing run's brackets depend on, as JSON-ready strings:
    this package's version, a digest of the producer sources, Python, numpy, scipy, the
    machine type and the loaded BLAS (with the kernel architecture OpenBLAS chose).  Describes
    the process that calls it: Dask workers on other hosts may load other kernels."""
    import numpy
    import scipy
    import scipy.linalg  # noqa: F401 - loads scipy's BLAS, so it is listed

    from softrank import __version__

    return {"softrank_certify": __version__,
            "producer_sources_sha256": producer_sources_sha256(),
            "python": platform.python_version(), "numpy": numpy.__version__,
            "scipy": scipy.__version__, "machine": platform.machine() or "unknown",
            "byteorder": sys.byteorder, "blas": _blas()}


@functools.lru_cache(maxsize=1)
def process_environment() -> dict[str, Any]:
    """Returns ``numerics_environment()`` of this process, computed once: a producing worker
    attaches it to every operator it returns, and its loaded libraries and modules do not
    change while it runs."""
    return numerics_environment()

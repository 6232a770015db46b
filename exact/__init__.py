"""Exact rational oracle for small cells and the theory's exact examples.

* :func:`oracle` - exact bracket / decision of r_eps(A) (unrestricted or row-stochastic B);
* :func:`grid_family` - the grid family (rank C, kappa(C), r_eps = L^r, all exact);
* :func:`gauge_example` - the shear gauge example (Gamma(t) vs kappa(C)).

Nothing here imports ``witnesses`` or ``softrank``; see ``proofs_notes/exact.md``.
"""

from .gauge import GaugeExample, gauge_example
from .grid import GridFamily, grid_family
from .oracle import ExactResult, oracle
from .verify import verify_result

__all__ = ["ExactResult", "GaugeExample", "GridFamily", "gauge_example", "grid_family",
           "oracle", "verify_result"]

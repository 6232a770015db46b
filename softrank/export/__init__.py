"""Replay bundles: the data an independent exact checker (replay/replay.py) needs.

Everything here is untrusted, like the producers: the bundle's Ky Fan certificates are
searched for in float64, and the replayer, not this package, decides whether they prove.
"""

from .bundle import write_bundle
from .kyfan import kyfan_certificate

__all__ = ["kyfan_certificate", "write_bundle"]

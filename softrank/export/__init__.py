"""Replay bundles: the data an independent exact checker (replay/replay.py) needs.

Everything here is untrusted, like the producers: the bundle's Ky Fan certificates are
searched for in float64, and the replayer, not this package, decides whether they prove.
"""

from .bundle import check_bundle_target, write_bundle
from .kyfan import kyfan_certificate

__all__ = ["check_bundle_target", "kyfan_certificate", "write_bundle"]

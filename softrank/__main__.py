"""``python -m softrank``: the same command line as ``softrank-certify``."""

import sys

from .cli import main

sys.exit(main())

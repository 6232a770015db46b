"""Application layer: command-line interface, store runs and reports.

Sits above the kernel (``certify``) and the store format (``witnesses``); it is the only
layer that reads files and writes reports.
"""

__version__ = "0.2.0"

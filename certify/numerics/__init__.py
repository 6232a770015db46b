"""Shared validated numerics of the kernel (see the package docstring of certify)."""

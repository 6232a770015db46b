"""The one exception type for bad input; it names where the input came from."""

from __future__ import annotations

MAX_REASON = 400  # characters of a reason shown; the rest is cut


class InputError(ValueError):
    """Raised for input that cannot be checked: bad shapes, NaN/Inf, bad tolerances, ...

    ``source`` names the file (or ``None`` for in-memory arrays) and ``field`` the
    record field or argument.  ``str(err)`` reads ``"<source>: <field>: <reason>"``.
    No verdict is ever derived from input that raised this error.
    """

    def __init__(self, reason: str, *, field: str | None = None, source: str | None = None):
        if len(reason) > MAX_REASON + 60:  # the slack keeps a cut reason from being cut again
            # reasons quote the offending value: a 100,000-element list from a store would
            # otherwise become a 300 kB error line; the end often says what is wrong, so it stays
            cut = len(reason) - MAX_REASON
            reason = f"{reason[:MAX_REASON - 150]} ...[{cut} characters cut]... {reason[-150:]}"
        self.reason = reason
        self.field = field
        self.source = source
        parts = [p for p in (source, field) if p]
        super().__init__(": ".join([*parts, reason]))

    def as_options(self, names: tuple[str, ...]) -> InputError:
        """Returns a copy whose field, when it is one of the parameter ``names`` of a function
        a command called, is the option the user typed (``L`` -> ``--L``)."""
        field = f"--{self.field}" if self.field in names else self.field
        return InputError(self.reason, field=field, source=self.source)

    def at(self, *, source: str | None = None, field_prefix: str | None = None) -> InputError:
        """Returns a copy of this error located in ``source`` with ``field_prefix.field``."""
        field = self.field
        if field_prefix:
            field = f"{field_prefix}.{field}" if field else field_prefix
        return InputError(self.reason, field=field, source=source or self.source)

"""The error types for input a user must fix: every command prints the message on one line and exits 2."""


class UsageError(ValueError):
    """Bad settings or data; ``str(error)`` names the problem and the fix on one line."""


class LocatedError(UsageError):
    """A bad line or record of a file; ``str(error)`` is ``location: reason`` (``file:line: ...``)."""

    def __init__(self, location, reason):
        super().__init__(f"{location}: {reason}")
        self.location = location
        self.reason = reason

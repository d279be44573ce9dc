"""The one error type for input a user must fix: every command prints its message on one line and exits 2."""


class UsageError(ValueError):
    """Bad settings or data; ``str(error)`` names the problem and the fix on one line."""

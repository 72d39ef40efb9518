"""User-facing errors: the CLI prints them as one line and exits non-zero."""


class EvalsuiteError(Exception):
    """A problem with the user's input or environment, with a message saying what to do."""

    exit_code = 2

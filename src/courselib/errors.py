"""Errors a learner can act on: what was wrong, where (file, line, field), and what to do."""
from __future__ import annotations


class CourseError(Exception):
    """A user-facing error, printed by the CLI as one line (exit 2), never as a traceback.

    ``str(err)`` reads like ``train.sbatch:7: --time: "100:00" is 100 minutes; did you mean
    100:00:00 (100 hours)?`` — location first, then the field, then the message and the fix.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None, hint: str | None = None):
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        self.hint = hint
        super().__init__(str(self))

    def located(self, *, file: str | None = None, line: int | None = None,
                field: str | None = None) -> "CourseError":
        """Return the same error with missing location parts filled in (the innermost wins)."""
        return type(self)(self.message, file=self.file or file,
                          line=self.line if self.line is not None else line,
                          field=self.field or field, hint=self.hint)

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line is not None else "") + ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        field = f"{self.field}: " if self.field else ""
        hint = f"; {self.hint}" if self.hint else ""
        return f"{where}{field}{self.message}{hint}"


class InputError(CourseError):
    """A file or argument that cannot be read into the model."""


class PrivilegeError(CourseError):
    """The real-system experiment needs a privilege this process does not have; nothing was touched."""

"""Exceptions and exit codes shared by every layer (layer 0: imports nothing internal)."""
from __future__ import annotations

EXIT_OK = 0          # ran, no error-severity finding
EXIT_FINDINGS = 1    # ran, at least one error-severity finding (or `rules test` failures)
EXIT_USAGE = 2       # usage, configuration, rule-file or input error


class LlmtriageError(Exception):
    """An error the user can fix; the CLI prints it as one line and exits 2."""

    exit_code = EXIT_USAGE


class InputError(LlmtriageError):
    """A log that cannot be triaged: missing, unreadable, empty or binary."""


class EmptyInputError(InputError):
    """The input holds no bytes at all."""


class RuleLoadError(LlmtriageError):
    """One or more rule/locale/taxonomy files are invalid. `problems` holds one line each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        n = len(self.problems)
        super().__init__("\n".join(self.problems) + f"\n{n} rule file problem{'s' if n != 1 else ''} found")


class ConfigError(LlmtriageError):
    """An invalid configuration file or value."""

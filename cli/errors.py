"""How every ``normstats`` command reports a user error: one line, exit status 1."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

__all__ = ["user_errors"]


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a NormstatsError raised by ``command`` into a one-line message and exit status 1.

    Examples
    --------
    >>> from normstats.errors import NormstatsError
    >>> @user_errors
    ... def broken():
    ...     raise NormstatsError("zero-byte file", path="a.png")
    >>> try:
    ...     broken()
    ... except click.ClickException as error:
    ...     print(error.format_message())
    a.png: zero-byte file
    """
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from normstats.errors import NormstatsError
        from normstats.results.text_report import printable

        try:
            return command(*args, **kwargs)
        except NormstatsError as error:
            raise click.ClickException(printable(str(error))) from None
    return wrapper

"""Files and folders the command line writes: checked before any work, never a user's own.

Every output path (``--plot FILE``, ``demo --out DIR``) is checked before the run
starts, so a mistake costs a second, not a computation: the folder it goes into must
exist and be writable, and an existing file is replaced only when the user passed
``--overwrite``. ``demo --out`` writes only into a new or empty folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from normstats.results.text_report import printable

__all__ = ["check_new_file", "check_new_folder", "overwrite_option", "write_with"]

overwrite_option = click.option(
    "--overwrite", is_flag=True, help="Replace the --plot file if it exists (default: refuse).")


def check_new_file(path: str, overwrite: bool = False) -> None:
    """Refuse ``path`` as an output file unless it can be written without loss.

    Raises
    ------
    click.ClickException
        When the folder is missing or read-only, ``path`` is a folder, or ``path``
        exists and ``overwrite`` is False.

    Examples
    --------
    >>> import tempfile, os
    >>> check_new_file(os.path.join(tempfile.mkdtemp(), "plot.png"))
    >>> try:
    ...     check_new_file("/no/such/folder/plot.png")
    ... except click.ClickException as error:
    ...     print(error.format_message())
    /no/such/folder/plot.png: the folder /no/such/folder does not exist
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise click.ClickException(f"{printable(path)}: is a folder; give a file name")
    if not folder.is_dir():
        raise click.ClickException(f"{printable(path)}: the folder {printable(str(folder))} "
                                   "does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise click.ClickException(f"{printable(path)}: the folder {printable(str(folder))} "
                                   "is not writable")
    if (target.exists() or target.is_symlink()) and not overwrite:
        raise click.ClickException(f"{printable(path)}: exists; choose a new name or pass "
                                   "--overwrite to replace it")


def check_new_folder(path: str) -> None:
    """Refuse ``path`` as an output folder unless it is new or empty (and can be made).

    Examples
    --------
    >>> import tempfile, os
    >>> check_new_folder(os.path.join(tempfile.mkdtemp(), "demo"))
    >>> try:
    ...     check_new_folder(os.path.dirname(os.__file__))
    ... except click.ClickException as error:
    ...     print(error.format_message().split(": ", 1)[1][:20])
    is not empty; normst
    """
    target = Path(path)
    if target.is_dir():
        if any(target.iterdir()):
            raise click.ClickException(
                f"{printable(path)}: is not empty; normstats writes only into a new or empty "
                "folder, so no file of yours is replaced")
        if not os.access(target, os.W_OK | os.X_OK):
            raise click.ClickException(f"{printable(path)}: is not writable")
        return
    if target.exists() or target.is_symlink():
        raise click.ClickException(f"{printable(path)}: exists and is not a folder")
    parent = target.parent if str(target.parent) else Path(".")
    existing = next((p for p in [parent, *parent.parents] if p.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise click.ClickException(f"{printable(path)}: cannot be created "
                                   f"({printable(str(existing))} is not a writable folder)")


def write_with(write: Callable[[str], Any], path: str) -> Any:
    """Call ``write(path)``; an operating-system error becomes one line naming the file.

    Examples
    --------
    >>> try:
    ...     write_with(lambda p: open(p, "w"), "/proc/no-such/x.png")
    ... except click.ClickException as error:
    ...     print(error.format_message())
    /proc/no-such/x.png: cannot be written (No such file or directory)
    """
    try:
        return write(path)
    except OSError as error:
        reason = error.strerror or str(error)
        raise click.ClickException(f"{printable(path)}: cannot be written ({reason})") from None

"""Where the record cache lives: ``$NORMSTATS_CACHE``, the XDG cache folder, or no cache.

The library writes no cache unless asked (``cache=True``, a path, or the environment
variable); the command line caches by default (see ``docs/cache.md``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "default_cache_dir", "cache_enabled_by_default", "resolve_cache_dir"]

CACHE_ENV = "NORMSTATS_CACHE"
_OFF = ("0", "off", "false", "no", "none")


def default_cache_dir() -> Path:
    """``$NORMSTATS_CACHE`` if it names a folder, else ``$XDG_CACHE_HOME/normstats``,
    else ``~/.cache/normstats``.

    Examples
    --------
    >>> default_cache_dir().name
    'normstats'
    """
    env = os.environ.get(CACHE_ENV, "").strip()
    if env and env.lower() not in _OFF:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "normstats"


def cache_enabled_by_default() -> bool:
    """False when ``$NORMSTATS_CACHE`` is ``0``/``off``/``false``/``no``/``none``."""
    return os.environ.get(CACHE_ENV, "").strip().lower() not in _OFF


def resolve_cache_dir(cache: str | os.PathLike | bool | None) -> Path | None:
    """The cache directory a `compute` call uses, or None for no cache.

    ``False`` disables it; a path names it; ``True`` means the default location;
    ``None`` (the library default) uses a cache only when ``$NORMSTATS_CACHE`` names a
    folder, so a library call never writes to the home directory unless asked to.

    Examples
    --------
    >>> resolve_cache_dir(False) is None, resolve_cache_dir("/tmp/c").name
    (True, 'c')
    """
    if cache is False:
        return None
    if cache is True:
        return default_cache_dir()
    if cache is None:
        env = os.environ.get(CACHE_ENV, "").strip()
        return Path(env).expanduser() if env and env.lower() not in _OFF else None
    return Path(os.fspath(cache)).expanduser()

"""``normstats cache list | show | clear``: see and remove what the record cache holds.

Listing reads only the small JSON files (group metadata and markers), so it is instant
however large the cache; ``show`` also verifies every segment against its digest.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import click

from normstats.errors import numbered
from normstats.results.text_report import printable

__all__ = ["cache_group", "cache_setting"]


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


def _when(timestamp: float) -> str:
    if not timestamp:
        return "never"
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


_cache_option = click.option(
    "--cache", "cache_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Cache directory (default: $NORMSTATS_CACHE, $XDG_CACHE_HOME/normstats or "
         "~/.cache/normstats).")


def cache_setting(cache_dir: str | None, no_cache: bool) -> str | bool:
    """What ``compute(cache=...)`` (and ``compare``'s) gets from the command line: on
    unless told otherwise; ``--cache DIR`` with ``--no-cache`` is a usage error."""
    from normstats.engine.cache.location import cache_enabled_by_default

    if no_cache and cache_dir is not None:
        raise click.UsageError(f"--cache {cache_dir} reads and writes the record cache there "
                               "and --no-cache neither: choose one")
    if no_cache:
        return False
    return cache_dir or cache_enabled_by_default()


@click.group("cache")
def cache_group() -> None:
    """List, inspect and clear the per-image record cache."""


@cache_group.command("list")
@_cache_option
def list_command(cache_dir: Path | None) -> None:
    """Cached datasets: last update, images, size on disk, decode policy and root."""
    from normstats.engine.cache.store import default_cache_dir

    cache_dir = cache_dir or default_cache_dir()
    from normstats.engine.cache.groups import find_groups

    found = find_groups(cache_dir)
    # a run that produced nothing (an empty folder, a folder of unreadable files only)
    # leaves an entry with no records: not a cached dataset
    groups = [g for g in found if g.images or g.failures]
    empty = len(found) - len(groups)
    if not groups:
        click.echo(f"no cached datasets in {printable(str(cache_dir))}")
        return
    policies = [_policy(g.identity) for g in groups]
    width = max(28, *map(len, policies))  # the roots line up however long a policy
    click.echo(f"{'updated':<16}  {'images':>10}  {'size':>9}  {'policy':<{width}}  root")
    for g, policy in zip(groups, policies):
        click.echo(f"{_when(g.updated):<16}  {g.images:>10,}  {_size(g.size):>9}  "
                   f"{policy:<{width}}  {printable(g.root)}")
    click.echo(f"{numbered(len(groups), 'dataset')}, {_size(sum(g.size for g in groups))} in "
               f"{printable(str(cache_dir))}" + (f"; {empty} empty entr"
                                                 f"{'y' if empty == 1 else 'ies'} not shown "
                                                 "(normstats cache clear removes them)"
                                                 if empty else ""))


def _policy(identity: dict) -> str:
    """The decode policy of a group as a reader knows it: ``RGB, Resize(256), CenterCrop(224)``.

    Examples
    --------
    >>> _policy({"policy": {"mode": "RGB", "resize": 256, "center_crop": 224}})
    'RGB, Resize(256), CenterCrop(224)'
    """
    from normstats.sources.decoding.policy import DEFAULT_MAX_PIXELS

    policy = identity.get("policy") or {}
    steps = [str(policy.get("mode", "?"))]
    if policy.get("resize"):
        steps.append(f"Resize({policy['resize']})")
    if policy.get("center_crop"):
        steps.append(f"CenterCrop({policy['center_crop']})")
    if policy.get("max_pixels") not in (None, DEFAULT_MAX_PIXELS):
        steps.append(f"max {policy['max_pixels']:,} pixels")
    return ", ".join(steps)


@cache_group.command("show")
@click.argument("path", type=click.Path(path_type=str))
@_cache_option
def show_command(path: str, cache_dir: Path | None) -> None:
    """Details of the cache of PATH (a dataset folder or a cache group folder)."""
    from normstats.engine.cache.groups import find_groups
    from normstats.engine.cache.store import DatasetCache, default_cache_dir

    cache_dir = cache_dir or default_cache_dir()
    groups = find_groups(cache_dir, path)
    if not groups:
        raise click.ClickException(_nothing_cached(path, cache_dir, "show"))
    for g in groups:
        segments, junk = DatasetCache(g.path, g.identity).load()
        valid = sum(len(s.index.paths) for s in segments)
        failures = [f for s in segments for f in s.index.failures]
        click.echo(f"{printable(str(g.path))}\n  root      {printable(g.root)}\n"
                   f"  policy    {json.dumps(g.identity.get('policy', {}))}\n"
                   f"  decoders  {_decoders(g.identity)}\n"
                   f"  images    {valid:,} verified records, "
                   f"{numbered(len(failures), 'recorded failure')}\n"
                   f"  segments  {len(segments)} committed, {junk} damaged or "
                   f"uncommitted\n  size      {_size(g.size)}\n  updated   {_when(g.updated)}")
        for failure in failures[:20]:
            click.echo(f"  failed    {printable(failure.path)}: {failure.reason}")


def _nothing_cached(path: str, cache_dir: Path, command: str) -> str:
    """Why PATH has no cache, naming the cached datasets inside it (a folder of class or
    split folders each computed on its own): the caches the user probably meant."""
    from normstats.engine.cache.groups import find_groups
    from normstats.engine.cache.store import dataset_root

    named = dataset_root(path).rstrip("/") + "/"
    inside = sorted({g.root for g in find_groups(cache_dir) if g.root.startswith(named)})
    message = f"{printable(path)}: nothing cached for it"
    if not inside:
        return message
    listed = ", ".join(printable(root) for root in inside[:5])
    more = f" and {len(inside) - 5:,} more" if len(inside) > 5 else ""
    return (f"{message}; {numbered(len(inside), 'cached dataset')} inside it: {listed}{more} "
            f"(normstats cache {command} {printable(inside[0])})")


def _decoders(identity: dict) -> str:
    """The decoder versions a group was made with (groups of format 1 knew only Pillow's)."""
    versions = identity.get("decoders") or {"pillow": identity.get("pillow", "?")}
    return ", ".join(f"{name} {version}" for name, version in sorted(versions.items()))


@cache_group.command("clear")
@click.argument("path", type=click.Path(path_type=str), required=False)
@_cache_option
@click.option("--yes", is_flag=True, help="Do not ask before clearing every dataset.")
def clear_command(path: str | None, cache_dir: Path | None, yes: bool) -> None:
    """Delete the cache of PATH (a dataset or group folder), or of every dataset."""
    from normstats.engine.cache.store import DatasetCache, default_cache_dir

    cache_dir = cache_dir or default_cache_dir()
    from normstats.engine.cache.groups import find_groups

    groups = find_groups(cache_dir, path)
    if path is not None and not groups:  # as `cache show`: a script learns of the typo
        raise click.ClickException(_nothing_cached(path, cache_dir, "clear"))
    if path is None and groups and not yes:
        click.confirm(f"delete the cache of {numbered(len(groups), 'dataset')} in {cache_dir}?",
                      abort=True)
    import shutil  # here: every compute loads this module (`cache_setting`), not this command

    cleared, refused = [], []
    for g in groups:
        cache = DatasetCache(g.path, g.identity)
        if not cache.try_lock(0.0):
            click.echo(f"{printable(str(g.path))}: in use by pid {cache.holder()}; not "
                       "cleared", err=True)
            refused.append(g)
            continue
        shutil.rmtree(g.path, ignore_errors=True)
        cache.unlock()
        cleared.append(g)
    what = numbered(len(cleared), "dataset") if cleared else "nothing"
    click.echo(f"cleared {what} ({_size(sum(g.size for g in cleared))})")
    if refused:  # a script must not take "in use, not cleared" for success
        click.get_current_context().exit(1)

"""``normstats manifests`` and ``normstats verify``: known datasets and their published constants.

The commands are registered on the main click group by `normstats_cli`; heavy modules
are imported inside them so ``normstats --help`` stays instant.
"""

from __future__ import annotations

import json
from typing import Any

import click

from normstats_cli.cache import cache_setting
from normstats_cli.compute_options import cache_place_flags
from normstats_cli.distributed import scheduler_option
from normstats_cli.errors import user_errors

__all__ = ["manifests_command", "verify_command", "compute_manifest_from_cli"]


@click.command("manifests")
@user_errors
def manifests_command() -> None:
    """List the shipped dataset manifests and the references each one carries."""
    from normstats.analyses.manifests import list_manifests
    from normstats.errors import numbered

    manifests = list_manifests()
    width = max(len(m.name) for m in manifests)
    for manifest in manifests:
        spec = manifest.source
        count = f"{spec.images:,} images" if spec.images else "images: any"
        click.echo(f"{manifest.name:<{width}}  {manifest.dataset} {manifest.split}, "
                   f"{spec.format}, {count}, {numbered(len(manifest.references), 'reference')}")
    click.echo("\nnormstats verify NAME --root DIR checks the references against your copy.")


def compute_manifest_from_cli(name: str, root: str | None, **options: Any) -> Any:
    """What ``normstats compute --manifest NAME --root DIR`` computes."""
    from normstats.analyses.manifests import compute_manifest, load_manifest
    from normstats.errors import InvalidOptionError

    if root is None:
        raise InvalidOptionError("--manifest needs --root DIR, the folder holding its files")
    manifest = load_manifest(name)
    stats = compute_manifest(manifest, root, **options)
    expected = manifest.source.images
    if expected is not None and expected != stats.images:  # the check `verify` makes
        click.echo(f"normstats: warning: manifest {manifest.name} expects {expected:,} images; "
                   f"{stats.images:,} were computed ({len(stats.skipped)} skipped): these are "
                   "not the constants of the complete split", err=True)
    return stats


@click.command("verify")
@click.argument("manifest")
@click.option("--root", required=True, type=click.Path(exists=True, file_okay=False,
                                                         path_type=str),
              help="Folder holding the manifest's files.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Parallel workers.")
@scheduler_option
@cache_place_flags
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
@user_errors
def verify_command(manifest: str, root: str, workers: int | None, scheduler: str | None,
                   cache: str | None, no_cache: bool, as_json: bool) -> None:
    """Compute MANIFEST (a shipped name or a .toml file) under --root and check its references.

    Prints PASS or FAIL per reference within its tolerance, and for every published
    number the computed variant it matches best. Exits 1 when a reference fails.
    """
    from normstats.analyses.manifests import compute_manifest, load_manifest, verify_checksums
    from normstats.analyses.verify import render_verification, verify_stats

    cached = cache_setting(cache, no_cache)
    loaded = load_manifest(manifest)
    checksums = tuple(verify_checksums(loaded, root))
    stats = compute_manifest(loaded, root, workers=workers, scheduler=scheduler, cache=cached)
    result = verify_stats(stats, loaded, checksums)
    click.echo(json.dumps(_as_dict(result), indent=2) if as_json
               else render_verification(result))
    if not result.passed:
        raise SystemExit(1)


def _as_dict(result: Any) -> dict[str, Any]:
    return {
        "manifest": result.manifest.name, "passed": result.passed,
        "count_problem": result.count_problem, "checksums": list(result.checksums),
        "stats": result.stats.to_dict(),
        "skipped": [s.to_dict() for s in result.stats.skipped],
        "references": [{
            "label": c.reference.label, "passed": c.passed, "problem": c.problem,
            "decides": c.reference.decides,
            "numbers": [{"claimed": n.claimed, "channel": n.channel, "published": n.published,
                         "computed": n.computed, "passed": n.passed, "best": n.best,
                         "best_value": n.best_value} for n in c.numbers],
        } for c in result.checks],
    }

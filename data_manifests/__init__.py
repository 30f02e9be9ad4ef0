"""The TOML manifests of known datasets, installed as ``normstats_manifests``.

Each ``*.toml`` file names where a dataset's files lie and the constants published for
it; `normstats.analyses.manifests` reads them through ``importlib.resources``.
"""

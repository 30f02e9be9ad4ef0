"""Analyses over records and statistics, never decoding again where records suffice.

`compute` is the public `normstats.compute`: the engine's exact run with every analysis of
the command line as an argument (sampling, percentiles, per-folder statistics, outliers,
a local cluster). Takes `DatasetStats` and per-image records and gives: comparisons of datasets
(`compare`, `plots`), published constants checked against computed ones (`manifests`,
`verify`), estimates from samples (`sampling`, `sampling_run`), the feature-scaling
condition report (`conditioning`, with the channel covariance's), by-folder and outlier
reports (`record_reports`), and the exact covariance of image patches (`patches`).
"""

"""Analyses over records and statistics, never decoding again where records suffice.

Takes `DatasetStats` and per-image records and gives: comparisons of datasets
(`compare`, `plots`), published constants checked against computed ones (`manifests`,
`verify`), estimates from samples (`sampling`, `sampling_run`), the feature-scaling
condition report (`conditioning`), and by-folder and outlier reports (`record_reports`).
"""

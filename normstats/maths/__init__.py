"""The exact maths: pure, I/O-free, no Dask.

Takes pixels (one image or a stack of same-shape images) and gives per-image records
(pixel count, Σx and Σx² or mean and M2, min and max per channel), their exact merge into a
`Summary`, and `DatasetStats` with every variant of the constants (pooled std, averaged
per-image std in both ddofs, RMS per-image std). Also here: fixed-point exact sums of
float64 values, the compiled single-pass 8-bit kernel, exact histograms, the channel
covariance (exact cross sums, `covariance`), its principal axes and whitening
(`whitening`), the exact covariance of image patches (`patches`), and the pure
functions that print `DatasetStats`: framework conventions (exporters) and the text report.
"""

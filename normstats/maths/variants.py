"""The std variants normstats reports, by name, with what each one is.

Every variant is a function of the per-image records: the pooled std uses the dataset's
Σx and Σx² over all N·H·W values of a channel; the per-image variants average each
image's own std (population ddof 0, or sample ddof 1 as ``torch.std`` gives per image).

Examples
--------
>>> sorted(VARIANTS)[:2]
['per_image_std', 'per_image_std_ddof1']
"""

from __future__ import annotations

__all__ = ["VARIANTS", "VECTOR_VARIANTS"]

VARIANTS: dict[str, str] = {
    "std": "pooled std over all pixels of the dataset (population, ddof 0)",
    "std_ddof1": "pooled sample std over all pixels (ddof 1)",
    "per_image_std": "mean over images of each image's own std (ddof 0)",
    "per_image_std_ddof1": "mean over images of each image's sample std (ddof 1), "
                           "what torch.std per image gives",
    "rms_per_image_std": "square root of the mean per-image variance",
}

#: The variants of vector data (N, d), which has no pixels nor images: each feature over
#: its rows.
VECTOR_VARIANTS: dict[str, str] = {
    "std": "std of each feature over its rows (population, ddof 0)",
    "std_ddof1": "sample std of each feature over its rows (ddof 1)",
}

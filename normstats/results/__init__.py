"""What a run found, and how it is shown: `DatasetStats`, its findings, reports and exporters.

`stats` holds every normalization constant of a dataset (`DatasetStats`), `findings` the
estimates and outliers some analyses add to it, `text_report` the report a person reads and
`exporters` the code a user pastes into a training script. Built from the exact summaries
of `normstats.maths`; the engine and the analyses hand them to the user.
"""

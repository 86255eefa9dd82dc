"""A cluster's failed jobs: per-log rows (local pool or Ray), the summary, repeat offenders and unknown clusters.

The public API (Ray and pyarrow are imported only by the functions that need them):
`rows(paths, jobs=N)` for any engine, `triage_dataset(ds)` for a Ray Dataset, `triage_item(item)` the
plain per-log function (Spark, Dask), `summarize(rows)` the fleet summary.
"""
from llmtriage.fleet.run import rows, triage_dataset, triage_item
from llmtriage.fleet.summary import summarize

__all__ = ["rows", "summarize", "triage_dataset", "triage_item"]

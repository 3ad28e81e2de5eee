"""The results store: every run recorded in SQLite by DUT and build, compared, checked for
regressions and plotted (issue 10). Textual-free (DESIGN rule 1).

  models.py    the typed documents (run result, trial records, methodology reports) with
               their schema_version; the store writes and reads through them
  metrics.py   the metric catalogue and the extraction of metrics from a result document
  store.py     the SQLite database: path, schema, migrations, atomic writes, queries
  record.py    the entry point for every verb that produces a result (``record_run``)
  analysis.py  medians, spreads, ``compare`` and ``check``
  plot.py      every plot: matplotlib for files, plotext and text for the terminal
"""

"""RFC 2544 / RFC 8219 / RFC 9693 procedures: binary search, trial runner, reports, plots.

registry.py keys every procedure by test name (run, report, metrics, trials, tables,
plots); run.py and scaleup.py run them, documents.py builds their reports (typed by
tgen_tui.results.models), output.py shows them.

Core package: never imports Textual (DESIGN rule 1). The procedures are written against
an async ``trial(rate, kind)`` function, so the same code drives the real lab (see
:mod:`tgen_tui.methodology.trial`) and the simulated DUTs of the tests
(:mod:`tgen_tui.methodology.sim`).
"""

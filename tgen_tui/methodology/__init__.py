"""RFC 2544 / RFC 8219 / RFC 9693 / RFC 9971 procedures: binary search, trial runner,
reports, plots. Three layers, each importing only the ones below it (an import-linter
contract in pyproject.toml):

- :mod:`~tgen_tui.methodology.registry` (top): every procedure keyed by test name, and
  the kit's generic functions handed the test's procedure (what the commands use);
- :mod:`~tgen_tui.methodology.procedures`: RFC 2544 (throughput, loss, latency, PDV),
  RFC 9693 (cps, capacity, teardown), the RFC 9971 search (mlr), the session sweep and
  the scale-up; each a ``run(state)`` with its report, metrics, trials and output;
- :mod:`~tgen_tui.methodology.kit` (bottom): parameters and state, setup, the trial
  runner, the binary search, verdicts, stats, progress, DUT control, drops, simulated
  DUTs, and the generic report and output (handed a Procedure).

Core package: never imports Textual (DESIGN rule 1). The procedures are written against
an async ``trial(rate, kind)`` function, so the same code drives the real lab
(:mod:`~tgen_tui.methodology.kit.trial`) and the simulated DUTs of the tests
(:mod:`~tgen_tui.methodology.kit.sim`).
"""

"""The methodology kit: what every procedure uses, and nothing of any one procedure.

params, state     the run's parameters (:class:`Params`) and what it produced (:class:`RunState`)
setup             the profile with its seed, a runner per frame size, max rate, preflight
verdict           the loss tolerance and :func:`judge` (the record: results.models.Trial)
trial             the real trial runner (one fresh engine per trial)
search, stats     RFC 2544's binary search and its repetition; median, nearest rank
progress          the stderr bar and the NDJSON trial lines
dut, drops        the DUT's control and timeout warnings; loss attribution per trial
sim               simulated DUTs (rate limit, state table) for root-free tests
procedure         the :class:`Procedure` a procedure fills in for the registry
documents, output the report built and shown for a Procedure handed in
tables            Markdown and CSV tables (USERS.md §1 layout)
"""

"""Choosing the send path by measurement (``tgen calibrate``) and remembering the choice.

- :mod:`.measure`: send flat out into a sink with each candidate path (sendmmsg and the
  TX ring at a few batch sizes), count with the interface counter, pick the fastest.
- :mod:`.cache`: the per-host cache (``~/.cache/tgen/txpath.json``), keyed by host and
  interface driver (and, when calibrated on one, the interface itself).
- :mod:`.resolve`: what a port's ``tx_path: auto`` becomes, and why (profile, cache or
  default).

The worker never imports this package; the engine resolves ``auto`` before it
configures a worker.
"""

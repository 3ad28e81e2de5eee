"""The run owner: one run from start to end, behind every front end.

``tgen run``, the console (``tgen tui``, ``tgen serve``), every methodology trial and
``tgen scaleup`` run through it: preflight, the DUT hooks, ``--flush-dut``, TCP
handshakes, DUT events, the engine (frame streams and socket flows), thresholds, the
typed result, the exit status, and the clean end on Ctrl-C, SIGTERM and SIGHUP. A front
end parses its options into a typed object, hands it here, and renders what comes back.

Layer: above the engine, below methodology (DESIGN.md). Never imports Textual.
"""

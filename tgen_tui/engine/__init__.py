"""The engine: trio controller of worker processes, stats sampling and probes (never Textual).

``open_engine(compiled, options)`` yields the one engine every front end drives, through
its contract (``api.EngineAPI`` + ``api.EngineFeed``). Its rooms: ``setup`` (frozen, pure),
``transport`` (how workers are reached; ``LocalTransport`` here, the Ray transport in
``tgen_tui.cluster``), ``portcontrol``, ``sampler`` (with ``stats`` and ``figures``).
"""

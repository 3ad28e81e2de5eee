"""Several tester hosts, one engine: ports placed on hosts through Ray (``--cluster``).

One code path, two transports. The engine (:mod:`tgen_tui.engine.controller`) reaches its
workers through a :class:`~tgen_tui.engine.transport.WorkerTransport`: the
``LocalTransport`` (pipes, shared memory), or this package's
:class:`~tgen_tui.cluster.transport.ClusterTransport`, which front ends pass in as
``EngineOptions.transport`` with ``--cluster`` (the engine never imports this package).
It drives a worker on another host through :class:`~tgen_tui.cluster.remote.RemoteWorkerHandle`
(the same interface as a local handle), which talks to a :class:`~tgen_tui.cluster.agent.TesterAgent`:
one Ray actor per host, placed by the custom resource ``tgen:<host>``. The agent spawns
the same worker processes, relays the same typed protocol
(:mod:`tgen_tui.worker.protocol`) line for line, and returns each worker's counter block
when the engine samples; the engine's sampler reads that copy exactly like a local block.

Set-up, one command per tester host (``HEAD`` is the head node's ``IP:6379``)::

    ray start --head --port 6379 --num-cpus 0           # on the engine's machine
    ray start --address HEAD --resources '{"tgen:tester-a": 1}'   # on tester-a
    tgen run profile.yaml --cluster HEAD                 # ports say host: tester-a

Modules: :mod:`~tgen_tui.cluster.clock` (offset estimation and the cross-host latency
policy, no Ray), :mod:`~tgen_tui.cluster.agent` (the actor's class, no Ray import),
:mod:`~tgen_tui.cluster.remote` (the engine's side; the only module that imports Ray),
:mod:`~tgen_tui.cluster.transport` (the transport the engine is given).
Nothing imports this package unless ``--cluster`` is given.
"""

"""Ping-pong on seqbus: the walking skeleton and the latency demo (messages:
``pingpong.idl``, generated into :mod:`examples.pingpong.messages`).

* :mod:`.nodes` — ``Pinger`` keeps one Ping in flight and times each round trip; ``Ponger``
  answers every Ping with a Pong. ``seqbus demo --pingpong`` runs them as processes.
"""

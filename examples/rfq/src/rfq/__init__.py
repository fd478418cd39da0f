"""rfq: a request-for-quote desk on seqbus, packaged as its own application.

Its messages (``rfq.idl``, beside this file) are not committed as generated code: the seqc
build hook generates and compiles them into :mod:`rfq.messages` when the package is built
(``pip install .``; see ``pyproject.toml`` and docs/packaging.md of seqbus).

* :mod:`rfq.dealer` — ``Dealer``: answers every ``QuoteRequest`` with a ``Quote`` priced from
  its own table, or ``QuoteRefused`` for a symbol it does not make a market in.
* :mod:`rfq.client` — ``Requester`` and the ``rfq-request`` command: sends requests and checks
  that each gets exactly one answer.
"""

"""Codec benchmark: the SPEC §3 NewOrder encoded, fully decoded and partially read with the
seqc-generated codec, msgspec, protobuf and the struct module, in one run.

Run ``python -m benchmarks.codec`` (after ``make setup``). Not a timed test: it prints
ns/message and ratios against the baselines measured in the same run.
"""

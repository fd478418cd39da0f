"""Benchmarks of the transports (shared-memory ring, SoupBinTCP) beside raw baselines measured
in the same run. The measuring code is Rust: rust/crates/transport/benches/transports.rs."""

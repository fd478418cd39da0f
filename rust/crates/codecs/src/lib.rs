//! The Rust codecs seqc generates from `schemas/` (`generated/rust/`, committed and checked
//! up to date by `make check-generated`), compiled as one crate so that `cargo test` checks
//! them against the shared test vectors in `schemas/vectors/`.

#[path = "../../../../generated/rust/mod.rs"]
mod generated;

pub use generated::*;

//! The Rust codecs seqc generates from `schemas/` (`generated/rust/`, committed and checked
//! up to date by `make check-generated`), compiled as one crate so that `cargo test` checks
//! them against the shared test vectors in `schemas/vectors/`.

// generated code keeps the layout seqc gives it (check-generated compares it byte for byte)
#[rustfmt::skip]
#[path = "../../../../generated/rust/mod.rs"]
mod generated;

pub use generated::*;

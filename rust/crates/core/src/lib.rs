//! seqbus-core

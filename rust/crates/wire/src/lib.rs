//! seqbus-wire

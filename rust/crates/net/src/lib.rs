//! seqbus-net

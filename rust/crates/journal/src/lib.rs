//! seqbus-journal

//! Store conformance suite.

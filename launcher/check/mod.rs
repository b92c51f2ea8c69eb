//! The checks `munmapq selftest` runs in its children, shared with the
//! probe programs the integration tests run (probes/ includes these files):
//! the invariant cases, seeded random call sequences, and thin wrappers
//! over the calls munmapq hooks.

pub mod invariants;
pub mod random;
#[allow(dead_code)] // the probes use the rest
pub mod sys;

//! The checks `munmapq selftest` runs in its children, shared with the
//! probe programs the integration tests run (an installed munmapq has no
//! probes, so they live here rather than in them): the invariant cases,
//! seeded random call sequences, and thin wrappers over the calls munmapq
//! hooks; and the library's platform facts the launcher and the tests share.

pub mod invariants;
pub mod platform;
pub mod random;
pub mod sys;

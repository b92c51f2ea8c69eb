//! What the probe programs share: a generator of git repositories of a
//! given shape (`mq-probe fast-import`, and `mq-bench`'s repositories).

pub mod repo;

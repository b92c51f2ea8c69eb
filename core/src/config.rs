//! Configuration from `MUNMAPQ_*` environment variables, parsed from raw
//! bytes without allocating.

use crate::table::{Evict, SLOTS};

/// Most queued mappings allowed: half the table, so live mappings always
/// have room to be tracked.
pub const MAX_ENTRIES_LIMIT: usize = SLOTS / 2;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Config {
    pub enabled: bool,
    /// The most mappings queued at once; fewer when the process nears
    /// `vm.max_map_count` (see [`crate::sizing`]).
    pub max_entries: usize,
    /// `MUNMAPQ_MAX_BYTES`: a fixed cap on the queued length. `None` (the
    /// default): the queue is bounded by the resident memory it keeps, not
    /// by its length (see [`crate::sizing`]).
    pub max_bytes: Option<usize>,
    /// `vm.max_map_count`, if the system has one.
    pub map_count_limit: Option<usize>,
    /// `RLIMIT_AS` at start-up, if set (re-read as the queue grows).
    pub address_space_limit: Option<usize>,
    pub reuse: bool,
    /// `MUNMAPQ_STEP_ASIDE`: small mappings pass through where the queue
    /// does not pay for them (`crate::payoff`); `0` keeps them all in the
    /// engine (to measure what the queue costs, or to test it).
    pub step_aside: bool,
    /// How a full queue is evicted (`MUNMAPQ_EVICT`).
    pub evict: Evict,
    pub stats: bool,
    /// `MUNMAPQ_SECCOMP=trust`: a seccomp filter the process inherited
    /// allows munmapq's system calls (the launcher probed it), so the
    /// library works under it instead of passing everything through.
    pub seccomp_trust: bool,
}

/// Facts about the system the defaults are derived from.
#[derive(Clone, Copy, Debug)]
pub struct System {
    /// `vm.max_map_count` (Linux), or `None` where there is no such limit.
    pub max_map_count: Option<usize>,
    /// `RLIMIT_AS` soft limit, or `None` when unlimited.
    pub address_space_limit: Option<usize>,
}

/// Default count cap where the system sets no map-count limit (macOS).
pub const DEFAULT_MAX_ENTRIES: usize = 4096;

impl Config {
    /// The defaults: at most 1/16 of `vm.max_map_count` queued (and at run
    /// time at most a quarter of the mappings left); no cap on the queued
    /// length but the resident-memory budget, and under `RLIMIT_AS` at
    /// most 1 MiB and an eighth of the room left ([`crate::sizing`]).
    pub fn defaults(sys: System) -> Config {
        let max_entries = match sys.max_map_count {
            Some(n) => (n / 16).clamp(1, DEFAULT_MAX_ENTRIES),
            None => DEFAULT_MAX_ENTRIES,
        };
        Config {
            enabled: true,
            max_entries,
            max_bytes: None,
            map_count_limit: sys.max_map_count,
            address_space_limit: sys.address_space_limit,
            reuse: true,
            step_aside: true,
            evict: Evict::Aged,
            stats: false,
            seccomp_trust: false,
        }
    }
}

/// A malformed variable: which one, and what it accepts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ConfigError {
    pub var: &'static str,
    pub accepts: &'static str,
}

pub const VAR_DISABLE: &str = "MUNMAPQ_DISABLE";
pub const VAR_MAX_ENTRIES: &str = "MUNMAPQ_MAX_ENTRIES";
pub const VAR_MAX_BYTES: &str = "MUNMAPQ_MAX_BYTES";
pub const VAR_REUSE: &str = "MUNMAPQ_REUSE";
pub const VAR_STEP_ASIDE: &str = "MUNMAPQ_STEP_ASIDE";
pub const VAR_EVICT: &str = "MUNMAPQ_EVICT";
pub const VAR_STATS: &str = "MUNMAPQ_STATS";
pub const VAR_SECCOMP: &str = "MUNMAPQ_SECCOMP";
/// Read by the export layer, not here: where to append the statistics line.
pub const VAR_STATS_FILE: &str = "MUNMAPQ_STATS_FILE";
/// Set by the launcher under `--stats`, read by the export layer: the
/// private directory where each process keeps its counters in a file
/// mapping of its own, which the launcher reads however the process ended.
pub const VAR_STATS_DIR: &str = "MUNMAPQ_STATS_DIR";
/// Read by the export layer: where to append the call trace (mq-replay).
pub const VAR_TRACE: &str = "MUNMAPQ_TRACE";

/// Every variable munmapq reads, with what it accepts (for `--help`).
pub const VARIABLES: [(&str, &str); 10] = [
    (VAR_DISABLE, ACCEPTS_BOOL),
    (VAR_MAX_ENTRIES, ACCEPTS_ENTRIES),
    (VAR_MAX_BYTES, ACCEPTS_BYTES),
    (VAR_REUSE, ACCEPTS_BOOL),
    (VAR_STEP_ASIDE, ACCEPTS_BOOL),
    (VAR_EVICT, ACCEPTS_EVICT),
    (VAR_STATS, ACCEPTS_BOOL),
    (VAR_SECCOMP, ACCEPTS_SECCOMP),
    (
        VAR_STATS_FILE,
        "an absolute file path (munmapq makes a relative one absolute; the library alone ignores it, saying so); each process appends one line of counters",
    ),
    (
        VAR_TRACE,
        "a file path; each process appends an 80-byte record per hooked call",
    ),
];

const ACCEPTS_BOOL: &str = "0 or 1";
const ACCEPTS_ENTRIES: &str = "an integer from 1 to 8192";
const ACCEPTS_BYTES: &str =
    "a size from 1 byte to 1T, in bytes or with a K, M, G or T suffix (powers of 1024)";
const ACCEPTS_EVICT: &str = "aged, oldest or all";
const ACCEPTS_SECCOMP: &str =
    "auto or trust (trust: an inherited seccomp filter allows munmapq's system calls)";

/// Parses the configuration; `get` answers a variable's raw value. An
/// empty value counts as unset, for every variable (`MUNMAPQ_STATS=`
/// like `MUNMAPQ_STATS_FILE=`: a way to turn one off in a shell line).
pub fn parse<'a>(
    sys: System,
    get: impl Fn(&'static str) -> Option<&'a [u8]>,
) -> Result<Config, ConfigError> {
    let get = |var| get(var).filter(|v| !v.is_empty());
    let mut cfg = Config::defaults(sys);
    let err = |var, accepts| ConfigError { var, accepts };
    if let Some(v) = get(VAR_DISABLE) {
        cfg.enabled = !parse_bool(v).ok_or(err(VAR_DISABLE, ACCEPTS_BOOL))?;
    }
    if let Some(v) = get(VAR_MAX_ENTRIES) {
        cfg.max_entries = parse_uint(v)
            .filter(|n| (1..=MAX_ENTRIES_LIMIT as u64).contains(n))
            .ok_or(err(VAR_MAX_ENTRIES, ACCEPTS_ENTRIES))? as usize;
    }
    if let Some(v) = get(VAR_MAX_BYTES) {
        cfg.max_bytes = Some(
            parse_size(v)
                .filter(|n| (1..=1u64 << 40).contains(n))
                .ok_or(err(VAR_MAX_BYTES, ACCEPTS_BYTES))? as usize,
        );
    }
    if let Some(v) = get(VAR_REUSE) {
        cfg.reuse = parse_bool(v).ok_or(err(VAR_REUSE, ACCEPTS_BOOL))?;
    }
    if let Some(v) = get(VAR_STEP_ASIDE) {
        cfg.step_aside = parse_bool(v).ok_or(err(VAR_STEP_ASIDE, ACCEPTS_BOOL))?;
    }
    if let Some(v) = get(VAR_EVICT) {
        cfg.evict = match v {
            b"oldest" => Evict::Oldest,
            b"aged" => Evict::Aged,
            b"all" => Evict::All,
            _ => return Err(err(VAR_EVICT, ACCEPTS_EVICT)),
        };
    }
    if let Some(v) = get(VAR_STATS) {
        cfg.stats = parse_bool(v).ok_or(err(VAR_STATS, ACCEPTS_BOOL))?;
    }
    if let Some(v) = get(VAR_SECCOMP) {
        cfg.seccomp_trust = match v {
            b"auto" => false,
            b"trust" => true,
            _ => return Err(err(VAR_SECCOMP, ACCEPTS_SECCOMP)),
        };
    }
    Ok(cfg)
}

fn parse_bool(v: &[u8]) -> Option<bool> {
    match v {
        b"0" => Some(false),
        b"1" => Some(true),
        _ => None,
    }
}

pub fn parse_uint(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    v.iter().try_fold(0u64, |n, &c| {
        c.is_ascii_digit()
            .then_some(())
            .and_then(|_| n.checked_mul(10))
            .and_then(|n| n.checked_add((c - b'0') as u64))
    })
}

pub fn parse_size(v: &[u8]) -> Option<u64> {
    let (digits, shift) = match v.last()? {
        b'k' | b'K' => (&v[..v.len() - 1], 10),
        b'm' | b'M' => (&v[..v.len() - 1], 20),
        b'g' | b'G' => (&v[..v.len() - 1], 30),
        b't' | b'T' => (&v[..v.len() - 1], 40),
        _ => (v, 0),
    };
    parse_uint(digits)?.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINUX: System = System {
        max_map_count: Some(65530),
        address_space_limit: None,
    };

    fn with(pairs: &'static [(&'static str, &'static str)]) -> Result<Config, ConfigError> {
        parse(LINUX, |var| {
            pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| v.as_bytes())
        })
    }

    #[test]
    fn defaults_respect_system_limits() {
        let c = with(&[]).unwrap();
        assert_eq!(c.max_entries, 4095);
        assert_eq!(c.max_bytes, None, "bounded by resident memory");
        assert!(c.enabled && c.reuse && !c.stats);
        let small = Config::defaults(System {
            max_map_count: Some(1000),
            address_space_limit: Some(64 << 20),
        });
        assert_eq!(small.max_entries, 62);
        assert_eq!(small.address_space_limit, Some(64 << 20));
        let mac = Config::defaults(System {
            max_map_count: None,
            address_space_limit: None,
        });
        assert_eq!(mac.max_entries, DEFAULT_MAX_ENTRIES);
    }

    #[test]
    fn good_values() {
        let c = with(&[
            ("MUNMAPQ_MAX_ENTRIES", "8192"),
            ("MUNMAPQ_MAX_BYTES", "16M"),
            ("MUNMAPQ_REUSE", "0"),
            ("MUNMAPQ_EVICT", "all"),
            ("MUNMAPQ_STATS", "1"),
            ("MUNMAPQ_DISABLE", "0"),
        ])
        .unwrap();
        assert_eq!(c.max_entries, 8192);
        assert_eq!(c.max_bytes, Some(16 << 20));
        assert!(!c.reuse && c.stats && c.enabled);
        assert_eq!(c.evict, Evict::All);
        assert!(!with(&[("MUNMAPQ_DISABLE", "1")]).unwrap().enabled);
        assert!(with(&[("MUNMAPQ_SECCOMP", "trust")]).unwrap().seccomp_trust);
        assert!(!with(&[("MUNMAPQ_SECCOMP", "auto")]).unwrap().seccomp_trust);
        assert!(with(&[]).unwrap().step_aside);
        assert!(!with(&[("MUNMAPQ_STEP_ASIDE", "0")]).unwrap().step_aside);
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (var, val) in [
            ("MUNMAPQ_MAX_ENTRIES", "0"),
            ("MUNMAPQ_MAX_ENTRIES", "8193"),
            ("MUNMAPQ_MAX_ENTRIES", "12x"),
            ("MUNMAPQ_MAX_BYTES", "2T"),
            ("MUNMAPQ_MAX_BYTES", "0"),
            ("MUNMAPQ_MAX_BYTES", "M"),
            ("MUNMAPQ_MAX_BYTES", "99999999999999999999999"),
            ("MUNMAPQ_REUSE", "yes"),
            ("MUNMAPQ_STEP_ASIDE", "no"),
            ("MUNMAPQ_EVICT", "newest"),
            ("MUNMAPQ_STATS", "true"),
            ("MUNMAPQ_DISABLE", " 1"),
            ("MUNMAPQ_SECCOMP", "yes"),
        ] {
            let e = parse(LINUX, |v| (v == var).then_some(val.as_bytes())).unwrap_err();
            assert_eq!(e.var, var, "{var}={val}");
            assert!(!e.accepts.is_empty());
        }
    }

    #[test]
    fn empty_is_unset() {
        for (var, _) in VARIABLES {
            let c = parse(LINUX, |v| (v == var).then_some(&b""[..])).unwrap();
            assert_eq!(c, with(&[]).unwrap(), "{var}=");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size(b"4096"), Some(4096));
        assert_eq!(parse_size(b"4k"), Some(4096));
        assert_eq!(parse_size(b"1G"), Some(1 << 30));
        assert_eq!(parse_size(b"-1"), None);
        assert_eq!(parse_uint(b"18446744073709551616"), None);
    }
}

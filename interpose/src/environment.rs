//! The `MUNMAPQ_*` variables, read in one pass over the environment the
//! loader hands the constructor (`getenv` would walk it once per
//! variable), without allocating.

use core::ffi::c_char;
use munmapq_core::config::{VARIABLES, VAR_STATS_DIR};

const PREFIX: &[u8] = b"MUNMAPQ_";

/// The names read besides `config::VARIABLES`: the report directory the
/// launcher hands its command under `--stats` (no user's setting).
const OTHERS: [&str; 1] = [VAR_STATS_DIR];
const NAMES: usize = VARIABLES.len() + OTHERS.len();

/// The `k`th name read.
fn name(k: usize) -> &'static str {
    if k < VARIABLES.len() {
        VARIABLES[k].0
    } else {
        OTHERS[k - VARIABLES.len()]
    }
}

/// The value of each variable of `config::VARIABLES` and `OTHERS` (the
/// first entry of that name, as `getenv` answers), as bytes of the
/// environment.
pub struct Environment {
    values: [Option<&'static [u8]>; NAMES],
}

impl Environment {
    /// Reads `envp`, a NULL-terminated array of `NAME=value` strings (NULL:
    /// an empty environment).
    ///
    /// # Safety
    /// `envp` and its strings stay valid and unchanged while the answer is
    /// used (the constructor's own arguments: it keeps nothing after it
    /// returns but copies).
    pub unsafe fn read(envp: *const *const c_char) -> Environment {
        let mut env = Environment {
            values: [None; NAMES],
        };
        if envp.is_null() {
            return env;
        }
        let mut at = envp;
        loop {
            // SAFETY: the array is NULL-terminated (our caller's contract).
            let entry = unsafe { *at };
            if entry.is_null() {
                break;
            }
            // SAFETY: as above; `at` has not reached the terminator.
            at = unsafe { at.add(1) };
            // SAFETY: a NUL-terminated string; the comparison stops at the
            // first byte that differs, the NUL included.
            if !unsafe { starts_with(entry.cast(), PREFIX) } {
                continue;
            }
            for k in 0..NAMES {
                let name = name(k);
                // SAFETY: as above.
                if env.values[k].is_none() && unsafe { starts_with(entry.cast(), name.as_bytes()) }
                {
                    // SAFETY: the string goes on past the name (it matched
                    // without reaching its NUL).
                    let rest = unsafe { entry.cast::<u8>().add(name.len()) };
                    // SAFETY: as above.
                    if unsafe { *rest } == b'=' {
                        // SAFETY: the value is NUL-terminated.
                        env.values[k] = Some(unsafe { until_nul(rest.add(1)) });
                    }
                }
            }
        }
        env
    }

    /// Whether any variable read is set, `var` aside.
    pub fn any_besides(&self, var: &str) -> bool {
        (0..NAMES).any(|k| name(k) != var && self.values[k].is_some())
    }

    /// The value of `var`, one of `config::VARIABLES` or `OTHERS`.
    pub fn get(&self, var: &str) -> Option<&'static [u8]> {
        let k = (0..NAMES).position(|k| name(k) == var)?;
        self.values[k]
    }
}

/// Whether the NUL-terminated string at `s` begins with `prefix` (which
/// holds no NUL).
///
/// # Safety
/// `s` is NUL-terminated.
unsafe fn starts_with(s: *const u8, prefix: &[u8]) -> bool {
    for (k, &c) in prefix.iter().enumerate() {
        // SAFETY: every byte before this one matched a non-NUL byte, so
        // the string goes on at least to `k`.
        if unsafe { *s.add(k) } != c {
            return false;
        }
    }
    true
}

/// The bytes of the NUL-terminated string at `s`.
///
/// # Safety
/// `s` is NUL-terminated and outlives the answer.
unsafe fn until_nul(s: *const u8) -> &'static [u8] {
    let mut n = 0;
    // SAFETY: stops at the NUL. Volatile reads: the compiler would make
    // this loop a call to `strlen`, bound at load.
    while unsafe { s.add(n).read_volatile() } != 0 {
        n += 1;
    }
    // SAFETY: `n` bytes, all inside the string.
    unsafe { core::slice::from_raw_parts(s, n) }
}

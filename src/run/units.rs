//! Figures as a reader reads them: proper plurals, byte counts in KiB and
//! MiB, seconds to the hundredth (the `--stats` text report).

use std::time::Duration;

/// `1 process`, `2 processes`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A byte count as a reader reads it: `512 B`, `2.3 MiB`, `812 KiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v < 99.95 {
        format!("{v:.1} {}", UNITS[unit])
    } else {
        format!("{v:.0} {}", UNITS[unit])
    }
}

/// Seconds, to the hundredth below a minute and a hundred.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 99.995 {
        format!("{s:.2} s")
    } else {
        format!("{s:.0} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_a_reader_reads_them() {
        assert_eq!(count(1, "process", "processes"), "1 process");
        assert_eq!(count(0, "process", "processes"), "0 processes");
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(2359296), "2.2 MiB");
        assert_eq!(bytes(831488), "812 KiB");
        assert_eq!(bytes(5 << 30), "5.0 GiB");
        assert_eq!(seconds(Duration::from_millis(1234)), "1.23 s");
        assert_eq!(seconds(Duration::from_secs(250)), "250 s");
    }
}

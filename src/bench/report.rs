//! What a bench found, as text short enough to paste into an issue or as
//! one JSON object: each configuration's CPU and wall time (median and
//! range), peak RSS and faults, the paired CPU ratio, the library's
//! counters, and one verdict line.

use super::sample::Sample;
use crate::run::report::{settings_json, Report};
use munmapq_core::stats::Counter;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// Below this paired CPU ratio munmapq pays; above, the difference is
/// within what alternating runs of one command vary by, or a cost.
const PAYS_BELOW: f64 = 0.97;

/// Why there is no ratio.
pub enum Problem {
    /// The command failed (in a configuration): not timed.
    Failed(String),
    /// Outputs differed: a faster wrong answer is not a result.
    Differs(String),
    /// The library did not load into the command (or reported nothing).
    NotLoaded(String),
}

impl Problem {
    fn kind(&self) -> &'static str {
        match self {
            Problem::Failed(_) => "failed",
            Problem::Differs(_) => "outputs differ",
            Problem::NotLoaded(_) => "library not loaded",
        }
    }
    fn text(&self) -> &str {
        match self {
            Problem::Failed(s) | Problem::Differs(s) | Problem::NotLoaded(s) => s,
        }
    }
}

/// For git: `munmapq doctor git`'s line on the pack settings, and the
/// settings as (key, value, where it is set).
pub type GitSettings = (String, Vec<(String, String, String)>);

/// One bench of one command.
pub struct Outcome {
    pub command: Vec<String>,
    pub warmup: u32,
    pub without: Vec<Sample>,
    pub with: Vec<Sample>,
    /// The pairs stopped at the time budget, not the run count.
    pub timed_out: bool,
    pub problem: Option<Problem>,
    /// `munmapq doctor git`'s line on the pack settings, and the settings.
    pub git: Option<GitSettings>,
}

/// Median and range.
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

pub fn spread(mut v: Vec<f64>) -> Option<Spread> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

impl Outcome {
    /// The paired CPU ratios (with / without), one per pair.
    fn ratios(&self) -> Vec<f64> {
        self.without
            .iter()
            .zip(&self.with)
            .map(|(a, b)| b.cpu / a.cpu.max(1e-6))
            .collect()
    }

    pub fn cpu_ratio(&self) -> Option<Spread> {
        if self.problem.is_some() {
            return None;
        }
        spread(self.ratios())
    }

    /// The counters of the last run with the library (summed over its
    /// processes).
    pub fn counters(&self) -> Option<&Report> {
        self.with.last().and_then(|s| s.report.as_ref())
    }

    pub fn verdict(&self) -> String {
        if let Some(p) = &self.problem {
            return format!("no verdict: {}", p.kind());
        }
        match self.cpu_ratio() {
            Some(r) if r.median < PAYS_BELOW => format!("pays here: {:.2}x CPU", r.median),
            Some(r) => format!("does not pay here: {:.2}x CPU", r.median),
            None => "no verdict: nothing measured".into(),
        }
    }

    pub fn text(&self, head: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{head}command:  {}", shell_words(&self.command));
        if let Some(p) = &self.problem {
            let _ = writeln!(s, "{head}{}: {}", p.kind().to_uppercase(), p.text());
        }
        let pairs = self.without.len().min(self.with.len());
        if pairs > 0 {
            let out = &self.without[0];
            let _ = writeln!(
                s,
                "{head}runs:     {pairs} pair(s) alternating without/with, after {} warm-up run(s) of each{}; output {} bytes{}",
                self.warmup,
                if self.timed_out { ", stopped by --time" } else { "" },
                out.bytes,
                if self.problem.is_none() { ", identical in every run" } else { "" }
            );
            let _ = writeln!(s, "{head}          {:<28}with munmapq", "without munmapq");
            let both = |f: &dyn Fn(&[Sample]) -> String| {
                format!("{:<28}{}", f(&self.without), f(&self.with))
            };
            let ms = |v: Vec<f64>| {
                spread(v).map_or("-".into(), |p| {
                    format!("{} ({}-{})", secs(p.median), secs(p.min), secs(p.max))
                })
            };
            let _ = writeln!(
                s,
                "{head}CPU s:    {}",
                both(&|v| ms(v.iter().map(|x| x.cpu).collect()))
            );
            let _ = writeln!(
                s,
                "{head}wall s:   {}",
                both(&|v| ms(v.iter().map(|x| x.wall).collect()))
            );
            let _ = writeln!(
                s,
                "{head}peak RSS: {}",
                both(&|v| mib(v.iter().map(|x| x.peak_rss_kib).max().unwrap_or(0)))
            );
            let _ = writeln!(
                s,
                "{head}faults:   {}",
                both(&|v| {
                    spread(v.iter().map(|x| x.faults as f64).collect())
                        .map_or("-".into(), |p| format!("{:.0}", p.median))
                })
            );
        }
        if let Some(r) = self.counters() {
            let g = |c| r.get(c);
            let _ = writeln!(
                s,
                "{head}library:  {} process(es): {} maps, {} reused, munmaps {} deferred, {} issued (of {})",
                r.loaded,
                g(Counter::MmapCalls),
                g(Counter::Reused),
                g(Counter::Deferred),
                g(Counter::MunmapSyscalls),
                g(Counter::MunmapCalls)
            );
        }
        if let Some((line, _)) = &self.git {
            let _ = writeln!(s, "{head}git:      {line}");
        }
        if let Some(r) = self.cpu_ratio() {
            let _ = writeln!(
                s,
                "{head}paired CPU ratio (with/without): {:.3} (from {:.3} to {:.3} over {pairs} pairs)",
                r.median, r.min, r.max
            );
        }
        let _ = writeln!(s, "{head}verdict:  {}", self.verdict());
        s
    }

    /// The same as one JSON object (without the platform, which the
    /// caller adds once).
    pub fn json(&self) -> Value {
        let mut o = Map::new();
        o.insert("command".into(), json!(self.command));
        o.insert("warmup".into(), json!(self.warmup));
        o.insert(
            "pairs".into(),
            json!(self.without.len().min(self.with.len())),
        );
        o.insert(
            "stopped_by".into(),
            json!(if self.timed_out { "time" } else { "runs" }),
        );
        o.insert(
            "problem".into(),
            json!(self
                .problem
                .as_ref()
                .map(|p| json!({"kind": p.kind(), "why": p.text()}))),
        );
        if let Some(first) = self.without.first() {
            o.insert(
                "output".into(),
                json!({"bytes": first.bytes, "fnv1a": format!("{:016x}", first.hash)}),
            );
        }
        for (name, v) in [("without", &self.without), ("with", &self.with)] {
            o.insert(
                name.into(),
                json!({
                    "runs": v.len(),
                    "cpu_s": spread_json(spread(v.iter().map(|x| x.cpu).collect())),
                    "wall_s": spread_json(spread(v.iter().map(|x| x.wall).collect())),
                    "peak_rss_kib": v.iter().map(|x| x.peak_rss_kib).max().unwrap_or(0),
                    "faults": spread_json(spread(v.iter().map(|x| x.faults as f64).collect())),
                }),
            );
        }
        o.insert("cpu_ratio".into(), spread_json(self.cpu_ratio()));
        let counters = self.counters().map(|r| {
            let mut c = Map::new();
            c.insert("processes".into(), json!(r.loaded));
            c.insert("reported".into(), json!(r.reported));
            for &k in Counter::ALL {
                c.insert(k.key().into(), json!(r.get(k)));
            }
            c
        });
        o.insert("counters".into(), json!(counters));
        o.insert(
            "git".into(),
            json!(self.git.as_ref().map(|(line, settings)| {
                json!({"doctor": line, "settings": settings_json(settings)})
            })),
        );
        o.insert("verdict".into(), json!(self.verdict()));
        Value::Object(o)
    }
}

/// A command line as a shell would take it back: words with spaces or
/// shell characters in single quotes.
pub fn shell_words(words: &[String]) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./=:,+@%-".contains(c);
    words
        .iter()
        .map(|w| {
            if !w.is_empty() && w.chars().all(plain) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Rounded to the microsecond (or millionth), as the text report is to
/// fewer places; not a number (never expected) is null.
fn spread_json(p: Option<Spread>) -> Value {
    let six = |v: f64| json!((v * 1e6).round() / 1e6);
    p.map_or(
        Value::Null,
        |p| json!({"median": six(p.median), "min": six(p.min), "max": six(p.max)}),
    )
}

fn secs(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range() {
        let p = spread(vec![3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((p.median, p.min, p.max), (2.5, 1.0, 10.0));
        assert!(spread(vec![]).is_none());
    }

    #[test]
    fn command_lines_are_quoted_as_a_shell_reads_them() {
        let w = |a: &[&str]| shell_words(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(w(&["git", "log", "-n", "3"]), "git log -n 3");
        assert_eq!(w(&["sh", "-c", "echo $$", ""]), "sh -c 'echo $$' ''");
        assert_eq!(w(&["it's"]), "'it'\\''s'");
    }
}

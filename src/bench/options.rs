//! `munmapq bench`'s command line. A bad one is refused with status 125
//! before anything runs, as the launcher's own options are.

use crate::cli::hint;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub struct BenchOptions {
    /// Most pairs (one run without the library, one with).
    pub runs: u32,
    /// No new pair starts after this many seconds (warm-up included).
    pub time: f64,
    /// Warm-up runs of each configuration, not counted.
    pub warmup: u32,
    pub json: bool,
    pub lib: Option<PathBuf>,
    /// `--seed`: git log --raw under the seed's settings, in this repository.
    pub seed: bool,
    pub command: Vec<OsString>,
}

pub const DEFAULT_RUNS: u32 = 10;
pub const DEFAULT_TIME: f64 = 60.0;
/// `--seed`: per row, the calibration included.
pub const DEFAULT_SEED_TIME: f64 = 120.0;

const OPTIONS: [&str; 8] = [
    "--runs", "--time", "--warmup", "--json", "--lib", "--seed", "--help", "-h",
];

/// The options, then COMMAND (`--` ends the options); Err: the usage
/// error, said as the launcher says its own.
pub fn parse(args: &[OsString]) -> Result<BenchOptions, String> {
    let mut o = BenchOptions {
        runs: DEFAULT_RUNS,
        time: 0.0,
        warmup: 1,
        json: false,
        lib: None,
        seed: false,
        command: Vec::new(),
    };
    let mut time = None;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg.as_bytes().first() != Some(&b'-') || arg.as_bytes() == b"-" {
            i -= 1;
            break;
        }
        let a = arg.to_string_lossy().into_owned();
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            let v = match &inline {
                Some(v) => Some(v.clone()),
                None => {
                    i += 1;
                    args.get(i - 1).map(|v| v.to_string_lossy().into_owned())
                }
            };
            v.filter(|v| !v.is_empty())
                .ok_or(format!("bench: {name} needs {what}"))
        };
        let flag = |set: &mut bool| match &inline {
            Some(v) => Err(format!("bench: {name} takes no value ({name}={v} given)")),
            None => {
                *set = true;
                Ok(())
            }
        };
        match name.as_str() {
            "--" if inline.is_none() => break,
            "--runs" => o.runs = count(&name, &value("a number of pairs, 1 or more")?, 1)?,
            "--warmup" => o.warmup = count(&name, &value("a number of runs")?, 0)?,
            "--time" => {
                let v = value("a number of seconds")?;
                match v.trim_end_matches('s').parse::<f64>() {
                    Ok(t) if t > 0.0 && t.is_finite() => time = Some(t),
                    _ => {
                        return Err(format!(
                            "bench: --time {v:?}: accepts a number of seconds above 0"
                        ))
                    }
                }
            }
            "--lib" => o.lib = Some(PathBuf::from(value("a path")?)),
            "--json" => flag(&mut o.json)?,
            "--seed" => flag(&mut o.seed)?,
            _ => {
                return Err(format!(
                    "bench: unknown option {name}{}",
                    hint(&name, &OPTIONS, "")
                ))
            }
        }
    }
    o.command = args[i..].to_vec();
    o.time = time.unwrap_or(if o.seed {
        DEFAULT_SEED_TIME
    } else {
        DEFAULT_TIME
    });
    match (o.seed, o.command.first()) {
        (true, Some(c)) => Err(format!(
            "bench: --seed runs git log --raw itself and takes no command ({:?} given)",
            c.to_string_lossy()
        )),
        (false, None) => Err("bench: no command given".into()),
        _ => Ok(o),
    }
}

fn count(name: &str, v: &str, least: u32) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n >= least && n <= 100_000 => Ok(n),
        _ => Err(format!(
            "bench: {name} {v:?}: accepts a whole number from {least} to 100000"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn options_then_the_command() {
        let o = parse(&args(&[
            "--runs", "3", "--time=5", "--json", "git", "--runs",
        ]))
        .unwrap();
        assert_eq!((o.runs, o.time, o.json, o.warmup), (3, 5.0, true, 1));
        assert_eq!(o.command, args(&["git", "--runs"]));
        let o = parse(&args(&["--", "--weird"])).unwrap();
        assert_eq!(o.command, args(&["--weird"]));
        assert_eq!(parse(&args(&["--seed"])).unwrap().time, DEFAULT_SEED_TIME);
    }

    #[test]
    fn bad_options_are_refused() {
        for bad in [
            &["--runs", "0", "true"][..],
            &["--runs"],
            &["--time", "-1", "true"],
            &["--time", "x", "true"],
            &["--json=1", "true"],
            &["--rnus", "3", "true"],
            &["--seed", "git"],
            &[],
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad:?}");
        }
        let e = parse(&args(&["--rnus", "3", "true"])).err().unwrap();
        assert!(e.contains("did you mean --runs"), "{e}");
    }
}

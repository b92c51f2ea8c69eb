//! Linux: which program really runs when a file is executed. A `#!` line
//! names an interpreter and at most one argument (the kernel's
//! binfmt_script); `/usr/bin/env NAME` finds NAME in PATH (and `env -S`
//! splits its argument into words); a file with neither `#!` nor an ELF
//! header fails with ENOEXEC, and execvp (which the launcher's spawn
//! follows) then runs it with `/bin/sh`.

use super::resolve;
use crate::quote::quote_path;
use std::path::{Path, PathBuf};

/// The kernel follows at most this many interpreters of interpreters.
const MAX_DEPTH: usize = 4;

/// From the file executed to the program that runs it.
#[derive(Debug, PartialEq)]
pub struct Chain {
    /// One line per step, e.g. `./s.sh: #!/bin/sh: run by /bin/sh`.
    pub steps: Vec<String>,
    /// The program the library must load into (an ELF file or other).
    pub program: PathBuf,
}

/// What a `#!` line asks for.
#[derive(Debug, PartialEq)]
pub enum Shebang {
    /// Run this interpreter (an absolute or relative path).
    Path(String),
    /// `env [OPTIONS] [NAME=VALUE...] NAME`: NAME looked up in PATH.
    Env(String),
}

/// The `#!` line of `head`, as the kernel splits it: the interpreter up to
/// the first blank, the rest (trimmed) one argument. None without `#!`.
pub fn shebang_line(head: &[u8]) -> Option<(String, Option<String>)> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|&c| c == b'\n').next().unwrap_or(b"");
    let line = String::from_utf8_lossy(line);
    let line = line.trim_matches([' ', '\t', '\r']);
    let (interp, arg) = match line.split_once([' ', '\t']) {
        Some((i, a)) => (i, Some(a.trim_matches([' ', '\t']).to_string())),
        None => (line, None),
    };
    Some((interp.to_string(), arg.filter(|a| !a.is_empty())))
}

/// What the interpreter and its one argument mean: `env` looks its
/// program up in PATH. Err: why it cannot run.
pub fn interpret(interp: &str, arg: Option<&str>) -> Result<Shebang, String> {
    if interp.is_empty() {
        return Err("its #! line names no interpreter".into());
    }
    if Path::new(interp).file_name().is_none_or(|n| n != "env") {
        return Ok(Shebang::Path(interp.to_string()));
    }
    let arg = arg.ok_or("#!env names no program")?;
    // Without -S the whole rest of the line is one program name.
    let words: Vec<&str> = match arg.strip_prefix("-S") {
        Some(rest) => rest.split_whitespace().collect(),
        None if arg.contains([' ', '\t']) => {
            return Err(format!(
                "env gets {arg:?} as one program name (the kernel passes the rest of the #! line \
                 as one argument); write #!{interp} -S {arg}"
            ))
        }
        None => vec![arg],
    };
    let mut it = words.into_iter();
    while let Some(w) = it.next() {
        match w {
            "-u" | "--unset" | "-C" | "--chdir" => {
                it.next();
            }
            "--" => {
                return it
                    .next()
                    .map(|p| Shebang::Env(p.into()))
                    .ok_or_else(no_prog)
            }
            w if w.starts_with('-') || w.contains('=') => {}
            program => return Ok(Shebang::Env(program.into())),
        }
    }
    Err(no_prog())
}

fn no_prog() -> String {
    "#!env names no program".into()
}

fn head(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut v = Vec::with_capacity(256);
    std::fs::File::open(path)
        .and_then(|f| f.take(256).read_to_end(&mut v))
        .map_err(|e| format!("{}: {e}", quote_path(path)))?;
    Ok(v)
}

/// Why a file would not run at all: one line, and whether it is because
/// something is not there (the launcher's 127) rather than not runnable.
#[derive(Debug)]
pub struct CannotRun {
    pub why: String,
    pub not_found: bool,
}

impl From<String> for CannotRun {
    fn from(why: String) -> Self {
        CannotRun {
            why,
            not_found: false,
        }
    }
}

/// Follows `#!` lines from `path` to the program that runs.
pub fn follow(path: &Path) -> Result<Chain, CannotRun> {
    let mut steps = Vec::new();
    let mut current = path.to_path_buf();
    for depth in 0..=MAX_DEPTH {
        let head = head(&current)?;
        if head.starts_with(b"\x7fELF") && super::elf::loadable(&current) {
            return Ok(Chain {
                steps,
                program: current,
            });
        }
        let shown = quote_path(&current);
        let next = match shebang_line(&head) {
            Some((interp, arg)) => {
                let line = match &arg {
                    Some(a) => format!("#!{interp} {a}"),
                    None => format!("#!{interp}"),
                };
                match interpret(&interp, arg.as_deref()).map_err(|e| format!("{shown}: {e}"))? {
                    Shebang::Path(p) => {
                        steps.push(format!("{shown}: a script ({line}), run by {p}"));
                        PathBuf::from(p)
                    }
                    Shebang::Env(name) => {
                        let found = resolve(&name).ok_or(CannotRun {
                            why: format!(
                                "{shown}: a script ({line}): {name} is not in PATH, so it does not run"
                            ),
                            not_found: true,
                        })?;
                        steps.push(format!(
                            "{shown}: a script ({line}): env runs {name}, {} in PATH, and passes the library on",
                            quote_path(&found)
                        ));
                        found
                    }
                }
            }
            // execvp runs a file the kernel refuses (ENOEXEC) with /bin/sh;
            // an interpreter must itself be a program or a script.
            None if depth == 0 => {
                steps.push(format!(
                    "{shown}: no #! line and not an ELF program the kernel can load: execvp (and munmapq) run it with /bin/sh"
                ));
                PathBuf::from("/bin/sh")
            }
            None => return Err(format!("{shown}: an interpreter that is neither an ELF program nor a script: the script does not run").into()),
        };
        if !next.is_file() {
            return Err(CannotRun {
                why: format!(
                    "{}: its interpreter {} does not exist, so it does not run",
                    shown,
                    quote_path(&next)
                ),
                not_found: !next.exists(),
            });
        }
        current = next;
    }
    Err(format!(
        "{}: more than {MAX_DEPTH} interpreters of interpreters: the kernel refuses it",
        quote_path(path)
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_lines_as_the_kernel_splits_them() {
        let p = |s: &str| shebang_line(s.as_bytes());
        assert_eq!(p("#!/bin/sh\necho"), Some(("/bin/sh".into(), None)));
        assert_eq!(
            p("#! /usr/bin/env  python3 \r\n"),
            Some(("/usr/bin/env".into(), Some("python3".into())))
        );
        assert_eq!(
            p("#!/bin/bash -eu -o pipefail"),
            Some(("/bin/bash".into(), Some("-eu -o pipefail".into())))
        );
        assert_eq!(p("echo hi"), None);
    }

    #[test]
    fn env_finds_the_program_name() {
        let i = |a: &str| interpret("/usr/bin/env", Some(a));
        assert_eq!(i("python3"), Ok(Shebang::Env("python3".into())));
        assert_eq!(i("-S python3 -u"), Ok(Shebang::Env("python3".into())));
        assert_eq!(
            i("-S -i -u HOME A=b perl -w"),
            Ok(Shebang::Env("perl".into()))
        );
        assert!(i("python3 -u").unwrap_err().contains("-S python3 -u"));
        assert!(i("-S A=b").is_err());
        assert_eq!(
            interpret("/bin/sh", Some("-e")),
            Ok(Shebang::Path("/bin/sh".into()))
        );
        assert!(interpret("", None).is_err());
    }
}

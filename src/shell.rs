//! `munmapq shell-init bash|zsh|fish [COMMAND...]` and `munmapq preload-env`: what
//! to put in a shell so that commands (git by default) always run through
//! munmapq, or the raw variables for those who prefer them.

use crate::library::find_library;
use crate::platform::{self, PRELOAD_LIST, PRELOAD_VAR};

/// Single-quotes `s` for sh-like shells.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn fish_quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', r"\\").replace('\'', r"\'"))
}

/// A command's name as shell-init writes a function of it: letters,
/// digits, `-`, `_` and `.`, not starting with `-` (an option, such as
/// `--help`, is no command).
fn is_plain_name(c: &str) -> bool {
    !c.is_empty()
        && !c.starts_with('-')
        && c.chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
}

/// A function per command that runs it through this munmapq (absolute
/// path, so it works whatever PATH says). Functions rather than aliases:
/// they also work in scripts that source them. Nothing is exported. `git`
/// goes to the git wrapper (`munmapq __git`, see git/wrap.rs): munmapq only in
/// a repository where it pays, git exec'd either way. Other commands go
/// through the launcher, which checks the program's architecture against
/// the library's (doctor::launcher::would_kill) before preloading it.
pub fn shell_init(shell: &str, commands: &[String]) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let exe = exe.to_string_lossy();
    let commands: Vec<&str> = if commands.is_empty() {
        vec!["git"]
    } else {
        commands.iter().map(String::as_str).collect()
    };
    if let Some(bad) = commands.iter().find(|c| !is_plain_name(c)) {
        return Err(format!(
            "shell-init: {} is not a command name",
            crate::quote::quote(bad.as_ref())
        ));
    }
    let load = match shell {
        "fish" => "munmapq shell-init fish | source".to_string(),
        sh => format!("eval \"$(munmapq shell-init {sh})\""),
    };
    let mut out = format!("# munmapq: run these commands through munmapq ({load})\n");
    for c in commands {
        // git goes through the git wrapper (git/wrap.rs): munmapq only in a
        // repository where it pays, else git as it is, exec'd either way.
        let call = if c == "git" {
            "__git".to_string()
        } else {
            format!("-- {c}")
        };
        // A function of that name the user already has (their own, or
        // fish's alias) is kept, and said: replacing it would silently
        // drop what it does. One of munmapq's (evaluated twice) is
        // replaced. The line says how to have both.
        let kept = format!(
            "munmapq: shell-init: {c} is already a shell function here, not munmapq's: kept it, so \
             {c} does not run through munmapq; to replace it, remove it first ({}); to have both, \
             make it call {} {call} where it runs {c}",
            if shell == "fish" {
                format!("functions -e {c}")
            } else {
                format!("unset -f {c}")
            },
            exe
        );
        match shell {
            // `function NAME {`: the name is not in command position, so
            // an alias of it (alias git=hub) cannot rewrite the definition
            // (`git() {` would define hub, or fail to parse in zsh).
            // `typeset -f` prints a function as it was written (bash and
            // zsh): munmapq's own ends with its call. Asked first without
            // a subshell, so a shell with no such function forks nothing.
            "bash" | "zsh" => out.push_str(&format!(
                "if typeset -f {c} >/dev/null 2>&1 && \
                 case \"$(typeset -f {c})\" in *' {call} \"$@\"'*) false ;; *) true ;; esac; then\n  \
                 printf '%s\\n' {} >&2\n\
                 else\n  \
                 function {c} {{ {} {call} \"$@\"; }}\n\
                 fi\n",
                sh_quote(&kept),
                sh_quote(&exe)
            )),
            // POSIX sh has no `function`: drop an alias of the name first.
            "sh" => out.push_str(&format!(
                "unalias {c} 2>/dev/null\n{c}() {{ {} {call} \"$@\"; }}\n",
                sh_quote(&exe)
            )),
            // fish's aliases are functions too.
            "fish" => out.push_str(&format!(
                "if functions -q {c}; and not string match -q -- '* {call} $argv*' (functions {c} | string collect)\n    \
                 printf '%s\\n' {} >&2\n\
                 else\n    \
                 function {c} --wraps {c}; {} {call} $argv; end\n\
                 end\n",
                fish_quote(&kept),
                fish_quote(&exe)
            )),
            other => {
                return Err(format!(
                    "shell-init: unknown shell {} (accepts bash, zsh or fish)",
                    crate::quote::quote(other.as_ref())
                ))
            }
        }
    }
    Ok(out)
}

/// The shells `preload-env` writes for.
pub const SHELLS: [&str; 4] = ["bash", "zsh", "sh", "fish"];

/// `munmapq preload-env [bash|zsh|fish]`: sets LD_PRELOAD (or
/// DYLD_INSERT_LIBRARIES) for everything the shell starts, keeping what is
/// set; sh syntax by default, fish's for fish. Refused on macOS, before the
/// library is looked for (`platform::shell_wide_ok`).
pub fn preload_env(shell: Option<&str>) -> Result<String, String> {
    let fish = shell == Some("fish");
    platform::shell_wide_ok(platform::LOADER)?;
    let lib = find_library(None)?;
    let lib = lib.to_string_lossy();
    let sep = PRELOAD_LIST.separator();
    // Already in the list (evaluated twice, or inherited): left as it is.
    Ok(if fish {
        format!(
            "# munmapq: preload the library into everything this shell starts (munmapq preload-env fish | source)\n\
             if not contains -- {lib} (string split -- '{sep}' \"${PRELOAD_VAR}\")\n    \
             if set -q {PRELOAD_VAR}; and test -n \"${PRELOAD_VAR}\"\n        \
             set -gx {PRELOAD_VAR} {lib}'{sep}'\"${PRELOAD_VAR}\"\n    \
             else\n        set -gx {PRELOAD_VAR} {lib}\n    \
             end\n\
             end\n",
            lib = fish_quote(&lib)
        )
    } else {
        format!(
            "# munmapq: preload the library into everything this shell starts (eval \"$(munmapq preload-env)\")\n\
             case '{sep}'\"${{{PRELOAD_VAR}-}}\"'{sep}' in\n  \
             *'{sep}'{lib}'{sep}'*) ;;\n  \
             *) export {PRELOAD_VAR}={lib}\"${{{PRELOAD_VAR}:+{sep}${PRELOAD_VAR}}}\" ;;\n\
             esac\n",
            lib = sh_quote(&lib)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_names() {
        assert_eq!(sh_quote("a'b"), r"'a'\''b'");
        let bash = shell_init("bash", &["git".into(), "tig".into()]).unwrap();
        assert!(
            bash.contains("function git {") && bash.contains(" __git \"$@\"; }"),
            "{bash}"
        );
        assert!(
            bash.contains("function tig {") && bash.contains(" -- tig \"$@\"; }"),
            "{bash}"
        );
        let fish = shell_init("fish", &[]).unwrap();
        assert!(fish.contains("function git --wraps git;") && fish.contains(" __git $argv;"));
        assert!(shell_init("bash", &["rm -rf".into()]).is_err());
        assert!(shell_init("bash", &["--help".into()]).is_err());
        assert!(shell_init("tcsh", &[])
            .unwrap_err()
            .contains("bash, zsh or fish"));
    }
}

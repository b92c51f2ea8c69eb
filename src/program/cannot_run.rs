//! The one line a command that could not be started gets, with the
//! status a shell gives it: 127 when it (or its interpreter) is not found,
//! 126 when it cannot be run. For the launcher and the git wrapper alike.

use crate::cli::fail;
use crate::out::why;
use std::io::ErrorKind;
use std::path::Path;
use std::process::ExitCode;

/// The command could not be started: 127 when it (or its interpreter) is
/// not found, 126 when it cannot be run; one line saying which.
pub fn cannot_run(
    command: &std::ffi::OsStr,
    program: Option<&Path>,
    e: &std::io::Error,
) -> ExitCode {
    let name = crate::quote::quote(command);
    let path = Path::new(command);
    let has_slash = command.as_encoded_bytes().contains(&b'/');
    let found = program.is_some() || has_slash;
    if e.kind() == ErrorKind::NotFound {
        if found {
            if let Some(why) = program.or(Some(path)).and_then(missing_interpreter) {
                return fail(&format!("{name}: {why}"), 127);
            }
        }
        let hint = match command.to_str() {
            Some(typed) if !has_slash => {
                crate::cli::hint(typed, &crate::help::WORDS.map(|w| w.0), "munmapq ")
            }
            _ => String::new(),
        };
        return fail(&format!("{name}: command not found{hint}"), 127);
    }
    if std::fs::metadata(program.unwrap_or(path)).is_ok_and(|m| m.is_dir()) {
        return fail(&format!("{name}: is a directory"), 126);
    }
    match e.kind() {
        ErrorKind::PermissionDenied => fail(&format!("{name}: permission denied"), 126),
        _ => fail(&format!("{name}: cannot run: {}", why(e)), 126),
    }
}

/// Why an existing file was "not found": its `#!` interpreter or its
/// dynamic linker is missing.
fn missing_interpreter(path: &Path) -> Option<String> {
    let head = crate::macho::head(path).ok()?;
    if let Some(interp) = super::shebang(&head) {
        return (!Path::new(&interp).exists())
            .then(|| format!("its #! interpreter {interp} was not found"));
    }
    let interp = super::elf::interpreter(path)?;
    (!super::elf::linker_exists(&interp))
        .then(|| format!("its dynamic linker {interp} was not found"))
}

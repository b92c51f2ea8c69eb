//! What a macOS main executable's `LC_DYLD_ENVIRONMENT` load commands say
//! about `dlsym`, read as dyld reads them: the library asks dyld with
//! `dlsym` whether it was interposed, and must not where that would halt
//! the process or answer NULL.
//!
//! Since dyld-1160 a main executable may carry `DYLD_DLSYM_RESULT=VALUE`
//! (dyld-1378 `dyld/DyldProcessConfig.cpp`, `ProcessConfig::Security::
//! Security`, from `mainExecutableHdr->forDyldEnv`, honoured whatever AMFI
//! allows): `null` and `null-allow:LIST` make `dlsym` answer NULL, `abort`
//! and `abort-allow:LIST` halt the process ("symbol address lookup (dlsym)
//! disabled in process"), unless the symbol is in `LIST`; `allow:LIST`
//! blocks nothing; each entry sets what it names over the earlier ones,
//! and an allow list stays until another replaces it. `dyld/DyldAPIs.cpp`
//! `APIs::addressLookupsDisabled` applies them: a symbol in the allow list
//! (the first place it appears, with a `:` before it and a `:` or the
//! end after it) is answered, else the
//! lookup is blocked or not. `mach_o/UnsafeHeader.cpp` `forDyldEnv` passes
//! only strings that start with `DYLD_` and hold a `=`.

/// `LC_DYLD_ENVIRONMENT` (`<mach-o/loader.h>`).
const LC_DYLD_ENVIRONMENT: u32 = 0x27;

/// Whether `dlsym(RTLD_DEFAULT, symbol)` is answered in a process whose
/// main executable has these load commands (`cmds`: the `sizeofcmds`
/// bytes after the Mach-O header, `ncmds` of them, in this machine's byte
/// order). Malformed commands (dyld refuses such a program at exec) count
/// as refusing: then nothing is asked.
pub fn dlsym_answered(cmds: &[u8], ncmds: u32, symbol: &[u8]) -> bool {
    let mut blocked = false;
    let mut allow: Option<&[u8]> = None;
    let mut at = 0usize;
    for _ in 0..ncmds {
        let (Some(cmd), Some(size)) = (word(cmds, at), word(cmds, at + 4)) else {
            return false;
        };
        let size = size as usize;
        let Some(this) = at.checked_add(size).and_then(|end| cmds.get(at..end)) else {
            return false;
        };
        if size < 8 {
            return false;
        }
        if cmd == LC_DYLD_ENVIRONMENT {
            let Some(text) = word(this, 8).and_then(|o| this.get(o as usize..)) else {
                return false;
            };
            let text = &text[..text.iter().position(|&b| b == 0).unwrap_or(text.len())];
            if let Some(value) = text.strip_prefix(b"DYLD_DLSYM_RESULT=") {
                if value == b"null" || value == b"abort" {
                    blocked = true;
                } else if let Some(list) = value
                    .strip_prefix(b"null-allow:")
                    .or_else(|| value.strip_prefix(b"abort-allow:"))
                {
                    blocked = true;
                    allow = Some(list);
                } else if let Some(list) = value.strip_prefix(b"allow:") {
                    blocked = false;
                    allow = Some(list);
                }
            }
        }
        at += size;
    }
    allow.is_some_and(|list| allowed(list, symbol)) || !blocked
}

/// dyld's test of an allow list: the *first* place `symbol` appears in
/// it (`strstr`) must have a `:` before it (the list's own start follows
/// the value's `:`) and a `:` or the end after it.
fn allowed(list: &[u8], symbol: &[u8]) -> bool {
    if symbol.is_empty() {
        return false;
    }
    let Some(i) = list.windows(symbol.len()).position(|w| w == symbol) else {
        return false;
    };
    let pre = i == 0 || list[i - 1] == b':';
    let post = list.get(i + symbol.len()).is_none_or(|&b| b == b':');
    pre && post
}

fn word(b: &[u8], at: usize) -> Option<u32> {
    let w = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Load commands: an `LC_SEGMENT_64`-sized filler, then one
    /// `LC_DYLD_ENVIRONMENT` per string, as ld's `-dyld_env` writes them.
    fn commands(env: &[&str]) -> (Vec<u8>, u32) {
        let mut b = Vec::new();
        b.extend_from_slice(&0x19u32.to_ne_bytes());
        b.extend_from_slice(&72u32.to_ne_bytes());
        b.resize(72, 0);
        for s in env {
            let size = (12 + s.len() + 1).next_multiple_of(8);
            b.extend_from_slice(&LC_DYLD_ENVIRONMENT.to_ne_bytes());
            b.extend_from_slice(&(size as u32).to_ne_bytes());
            b.extend_from_slice(&12u32.to_ne_bytes());
            b.extend_from_slice(s.as_bytes());
            b.resize(b.len() + size - 12 - s.len(), 0);
        }
        (b, 1 + env.len() as u32)
    }

    fn answered(env: &[&str]) -> bool {
        let (b, n) = commands(env);
        dlsym_answered(&b, n, b"mmap")
    }

    #[test]
    fn dlsym_result_as_dyld_reads_it() {
        assert!(answered(&[]));
        assert!(answered(&["DYLD_LIBRARY_PATH=/x"]));
        assert!(!answered(&["DYLD_DLSYM_RESULT=abort"]));
        assert!(!answered(&["DYLD_DLSYM_RESULT=null"]));
        assert!(!answered(&["DYLD_DLSYM_RESULT=null-allow:munmap:open"]));
        assert!(answered(&["DYLD_DLSYM_RESULT=abort-allow:open:mmap"]));
        assert!(answered(&["DYLD_DLSYM_RESULT=null-allow:mmap"]));
        assert!(!answered(&["DYLD_DLSYM_RESULT=null-allow:mmap64"]));
        // Only the first place the name appears counts, as with strstr.
        assert!(!answered(&["DYLD_DLSYM_RESULT=null-allow:mmap64:mmap"]));
        assert!(answered(&["DYLD_DLSYM_RESULT=allow:open"]));
        // An unknown value changes nothing; the last known one wins, and
        // a later `null` keeps the earlier allow list.
        assert!(answered(&["DYLD_DLSYM_RESULT=never"]));
        assert!(!answered(&[
            "DYLD_DLSYM_RESULT=allow:x",
            "DYLD_DLSYM_RESULT=abort"
        ]));
        assert!(answered(&[
            "DYLD_DLSYM_RESULT=abort",
            "DYLD_DLSYM_RESULT=allow:x"
        ]));
        assert!(answered(&[
            "DYLD_DLSYM_RESULT=allow:mmap",
            "DYLD_DLSYM_RESULT=null"
        ]));
        // Malformed: nothing asked.
        let (b, n) = commands(&["DYLD_DLSYM_RESULT=allow:x"]);
        assert!(!dlsym_answered(&b, n + 1, b"mmap"));
        assert!(!dlsym_answered(&b[..b.len() - 4], n, b"mmap"));
    }
}

//! The kernel's choice of a program's slice and dyld's of a library's:
//! which slice runs, whether it runs at all, and which library slices load
//! into it.

use super::arch::{names, Arch, SUBTYPE_ARM64E_V1};
use super::host::Host;

/// The kernel's preference for a slice on Apple Silicon, whose CPU subtype
/// is arm64e (xnu osfmk/arm64/cpu.c: `CPU_ARCH_ARMv8E`). xnu-11417
/// bsd/dev/arm/kern_machdep.c, `grade_binary` and `grade_arm64e_binary`:
/// arm64e of the current pointer-auth ABI (version 0 on macOS,
/// `CPU_SUBTYPE_ARM64_PTR_AUTH_CURRENT_VERSION` in osfmk/mach/machine.h)
/// 12, arm64e of another version 11, arm64 9 (V8 10). 0: not run natively.
fn apple_silicon_grade(a: Arch) -> u32 {
    match a.ptrauth_version() {
        Some(0) => 12,
        Some(_) => 11,
        None if a == Arch::Arm64 => 9,
        None => 0,
    }
}

/// The slice the kernel runs of a program with slices `program` on `host`,
/// None if none runs there. On Apple Silicon the best graded native slice
/// (xnu-11417 bsd/kern/mach_fat.c, `fatfile_getarch`: the first of the
/// highest grade), so a program with both an arm64 and an arm64e slice runs
/// its arm64e slice, whoever signed it; x86_64 under Rosetta only without a
/// native slice. Whether the kernel then agrees to run an arm64e slice is
/// `kernel_refuses`.
pub fn process_arch(program: &[Arch], host: Host) -> Option<Arch> {
    let has = |a: Arch| program.contains(&a);
    match host {
        Host::AppleSilicon => {
            let mut best: Option<(u32, Arch)> = None;
            for &a in program {
                let g = apple_silicon_grade(a);
                if g > 0 && best.is_none_or(|(bg, _)| g > bg) {
                    best = Some((g, a));
                }
            }
            match best {
                Some((_, a)) => Some(a),
                // Rosetta runs an x86_64h slice as x86_64.
                None => (has(Arch::X86_64) || has(Arch::X86_64h)).then_some(Arch::X86_64),
            }
        }
        Host::Intel => [Arch::X86_64h, Arch::X86_64].into_iter().find(|&a| has(a)),
    }
}

/// Does the kernel refuse to run the slice `process` it chose? xnu-11417
/// bsd/kern/kern_exec.c, `exec_mach_imgact`: an arm64e slice of pointer-auth
/// ABI version 0 that is not a platform binary (part of macOS) exits with
/// "not running binary ... built against preview arm64e ABI" unless the
/// Mac was booted with `-arm64e_preview_abi`. The exec is past its point of
/// no return there: the program does not fall back to its arm64 slice.
pub fn kernel_refuses(process: Arch, platform_binary: bool, preview_abi: bool) -> bool {
    process.ptrauth_version() == Some(0) && !platform_binary && !preview_abi
}

/// Is pointer authentication off in a process of slice `process`? xnu
/// kern_exec.c: `IMGPF_NOJOP` unless the slice is arm64e of the current
/// ABI (`arm64_cpusubtype_uses_ptrauth`), and an arm64e slice run so gets
/// the apple[] string `ptrauth_disabled=1` (`exec_add_apple_strings`);
/// dyld-1378 dyld/DyldProcessConfig.cpp, `Process::getMainArchs`: keys are
/// off for an arm64 main executable, or with `ptrauth_disabled=1`.
fn keys_off(process: Arch) -> bool {
    process == Arch::Arm64 || process.ptrauth_version().is_some_and(|v| v != 0)
}

/// dyld's rule: does a process of slice `process` find a slice it loads in
/// a library of `lib`? dyld-1378: the graded list is the one of dyld's own
/// architecture (dyld/DyldDelegates.cpp, `SyscallDelegate::getGradedArchs`
/// calls `GradedArchitectures::currentLoad` when building dyld), and
/// mach_o/GradedArchitectures.cpp gives, for the arm64e dyld of Apple
/// Silicon, `archs_arm64e` (arm64e only) with pointer authentication on and
/// `archs_arm64e_keysOff` (arm64e, arm64e.v1, arm64, arm64 V8) with it off;
/// for an x86_64 dyld `archs_mac` (x86_64; x86_64h first on a Haswell CPU,
/// `archs_macHaswell`). Slices compare whole subtypes for arm64
/// (mach_o/Architecture.cpp, `operator==`): an unversioned arm64e slice
/// loads nowhere.
pub fn loads_into(lib: &[Arch], process: Arch) -> bool {
    let has = |a: Arch| lib.contains(&a);
    match process {
        Arch::X86_64h => has(Arch::X86_64h) || has(Arch::X86_64),
        Arch::X86_64 => has(Arch::X86_64),
        p if keys_off(p) => {
            has(Arch::Arm64e) || has(Arch::Arm64eOther(SUBTYPE_ARM64E_V1)) || has(Arch::Arm64)
        }
        p if p.ptrauth_version().is_some() => has(Arch::Arm64e),
        p => has(p),
    }
}

/// How a process of slice `process` loads libraries: "arm64e" or "arm64e
/// (pointer authentication off)".
fn process_name(process: Arch) -> String {
    if process.ptrauth_version().is_some() && keys_off(process) {
        format!("{} with pointer authentication off", process.name())
    } else {
        process.name()
    }
}

/// Why dyld would kill a process of `program` with `lib` inserted, or None
/// when it loads (or the program does not run here at all: see
/// `process_arch` and `kernel_refuses`, which dyld never gets to).
pub fn would_kill(program: &[Arch], lib: &[Arch], host: Host) -> Option<String> {
    let process = process_arch(program, host)?;
    (!loads_into(lib, process)).then(|| {
        let only = if process.ptrauth_version().is_some() && !keys_off(process) {
            ", which loads only arm64e libraries,"
        } else {
            ""
        };
        format!(
            "it runs as {}{only} and the library has {}: dyld would refuse the library and kill the program",
            process_name(process),
            names(lib)
        )
    })
}

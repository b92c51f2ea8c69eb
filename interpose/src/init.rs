//! Start-up and exit: resolve the real functions, read the configuration
//! (one line on stderr if it is malformed, then pass-through), install the
//! fork handler, and at exit report the counters where asked.

use crate::environment::Environment;
use crate::platform::{os::RealOs, real};
use crate::ENGINE;
use core::ffi::{c_char, c_int};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use munmapq_core::config::{self, ConfigError, System, VAR_STATS_DIR, VAR_STATS_FILE};
use munmapq_core::stats::{self, LineWriter};

// The flags every process reads at load or at exit are kept in `.data`, on
// the page of the library's own data that the loader writes anyway: in
// `.bss`, past the 4 KiB path, they would cost a page fault of their own.
#[cfg_attr(target_os = "linux", link_section = ".data")]
static STATS_TO_STDERR: AtomicBool = AtomicBool::new(false);
/// `MUNMAPQ_STATS_FILE`, copied at start-up (the program may change its
/// environment later).
static mut STATS_FILE: [u8; 4096] = [0; 4096];
#[cfg_attr(target_os = "linux", link_section = ".data")]
static STATS_FILE_LEN: AtomicUsize = AtomicUsize::new(0);
/// `MUNMAPQ_STATS_DIR` was set: the launcher collects this process's
/// counters and says itself what it could not read.
#[cfg_attr(target_os = "linux", link_section = ".data")]
static UNDER_LAUNCHER: AtomicBool = AtomicBool::new(false);
/// A seccomp filter is in force (inherited and not trusted, or installed
/// by the program): munmapq passes everything through and makes no system
/// call of its own any more, the exit report included.
#[cfg_attr(target_os = "linux", link_section = ".data")]
static SANDBOXED: AtomicBool = AtomicBool::new(false);

/// A seccomp filter is being installed (see `SANDBOXED`).
pub(crate) fn sandboxed() {
    SANDBOXED.store(true, Ordering::Relaxed);
    crate::live::detach();
}

/// Whether this process inherited a seccomp filter (Linux: `prctl(
/// PR_GET_SECCOMP)` answers 2, one system call and no descriptor; a filter
/// that refuses prctl itself with an error counts as one too). Such a
/// filter may kill the process on any call munmapq makes (`statx`,
/// `fcntl`, `openat` of `/proc`, ...), so the library passes everything
/// through under it, unless `MUNMAPQ_SECCOMP=trust` says the filter
/// allows them (the launcher sets it after trying them under the filter).
#[cfg(target_os = "linux")]
fn inherited_filter() -> bool {
    crate::platform::seccomp_mode() != 0
}

/// macOS has no seccomp.
#[cfg(not(target_os = "linux"))]
fn inherited_filter() -> bool {
    false
}

/// The constructor: the dynamic loader runs it when the library is loaded.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = init;
#[cfg(target_os = "macos")]
#[used]
#[link_section = "__DATA,__mod_init_func,mod_init_funcs"]
static AT_LOAD: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = init;

/// The loader calls it with the program's arguments and environment (glibc
/// `call_init`, dyld `Loader::runInitializers`); only the environment is
/// read.
extern "C" fn init(_argc: c_int, _argv: *const *const c_char, envp: *const *const c_char) {
    real::resolve();
    // SAFETY: the environment the loader passes, valid during this call
    // (values that must outlive it are copied).
    let env = unsafe { Environment::read(envp) };
    let getenv = |var: &'static str| env.get(var);
    // With a variable of its own set, the library may write or open a
    // file at load (a report, a trace, a line about a bad value): an
    // inherited filter is asked about first. Otherwise the question waits
    // for the engine's first system call of its own (one more call at the
    // load of every process, most of which never map a file).
    let trusted = getenv(config::VAR_SECCOMP) == Some(b"trust");
    let ask_now = !trusted && env.any_besides(config::VAR_SECCOMP);
    if ask_now && inherited_filter() {
        // Nothing else: no configuration read (getrlimit), no load line.
        sandboxed();
        open_close_lane();
        return;
    }
    if !trusted && !ask_now {
        ENGINE.check_filter_later();
    }
    let page = match page_size() {
        0 => return,
        p => p,
    };
    remember_stats_file(getenv(VAR_STATS_FILE));
    if let Some(dir) = getenv(VAR_STATS_DIR) {
        UNDER_LAUNCHER.store(true, Ordering::Relaxed);
        if STATS_FILE_LEN.load(Ordering::Acquire) != 0 {
            crate::live::start(dir, page);
        }
    }
    if let Some(path) = getenv(crate::trace::VAR_TRACE) {
        crate::trace::open(path);
    }
    // Whether calls are traced is settled.
    open_close_lane();
    announce_load();
    let interposed = interposed();
    if !interposed {
        announce_not_interposed();
    }
    // vm.max_map_count and RLIMIT_AS are read only if something is ever
    // queued (a file read or a system call at load would cost every
    // process): see bound_entries_later, and the limit below.
    let sys = System {
        max_map_count: None,
        address_space_limit: None,
    };
    let forks_handled = register_fork_handlers();
    match config::parse(sys, getenv) {
        Ok(cfg) if !interposed => {
            // Off: were some call to reach a hook after all (a dlsym of
            // this image's own symbols), a queue fed by part of the calls
            // could hide a range from the others.
            if cfg.stats {
                write_all(2, NOT_INTERPOSED_LINE);
            }
        }
        // Off: a fork could copy the table in the middle of a change.
        Ok(_) if !forks_handled => {}
        Ok(cfg) => {
            if cfg.stats {
                // Written only when set: its page of `.bss` is not touched
                // at load otherwise.
                STATS_TO_STDERR.store(true, Ordering::Relaxed);
            }
            ENGINE.set_at_release(|| ENGINE.catch_up_after_release(&RealOs));
            ENGINE.start(&cfg, page);
            if !cfg.stats && STATS_FILE_LEN.load(Ordering::Acquire) == 0 {
                // Nothing reads the counters: `at_exit` writes no line.
                ENGINE.count_quietly();
            }
            // As after a change of the limit by the program: the sizing
            // takes the room under RLIMIT_AS for nothing until it has read
            // the limit, which it does before the first mapping is queued.
            ENGINE.address_space_limit_set(&RealOs, false);
            if cfg!(target_os = "linux") && getenv(config::VAR_MAX_ENTRIES).is_none() {
                ENGINE.bound_entries_later();
            }
        }
        Err(e) => report_config_error(e, getenv(e.var)),
    }
    // SAFETY: registers a plain function, run at exit (on Linux the
    // `.fini_array` entry below does this without registration).
    #[cfg(target_os = "macos")]
    unsafe {
        libc::atexit(at_exit)
    };
}

/// The common close may take its lane from now on, unless calls are
/// traced (Linux: `table_owner.rs`).
fn open_close_lane() {
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    crate::platform::table_owner::open_lane();
}

/// The page size, a power of two; 0 if unknown.
#[cfg(target_os = "linux")]
fn page_size() -> usize {
    real::page_size()
}

#[cfg(not(target_os = "linux"))]
fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 && (p as usize).is_power_of_two() => p as usize,
        _ => 0,
    }
}

/// Installs the handlers run around fork. glibc's `pthread_atfork` is a
/// static function of `libc_nonshared.a` calling `__register_atfork` with the
/// caller's `__dso_handle`; libc.so.6 exports it only as a compatibility
/// symbol on some architectures (x86_64) and not at all on others (aarch64),
/// and the library is linked without libc, so it calls what that function
/// calls. False if it could not.
#[cfg(target_os = "linux")]
fn register_fork_handlers() -> bool {
    type Handler = Option<extern "C" fn()>;
    type RegisterAtfork =
        unsafe extern "C" fn(Handler, Handler, Handler, *mut core::ffi::c_void) -> c_int;
    extern "C" {
        // Defined by the C runtime's crtbeginS.o in every shared object.
        static __dso_handle: u8;
    }
    let f = real::register_atfork_address();
    if f == 0 {
        return false;
    }
    // SAFETY: the C library's `__register_atfork` (its prototype); it
    // registers plain functions, called around fork; the handle is this
    // library's own, which only names it (unregistered if unloaded).
    unsafe {
        let register: RegisterAtfork = core::mem::transmute(f);
        register(
            Some(before_fork),
            Some(after_fork_in_parent),
            Some(after_fork_in_child),
            core::ptr::addr_of!(__dso_handle) as *mut core::ffi::c_void,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn register_fork_handlers() -> bool {
    // SAFETY: registers plain functions, called around fork.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_in_parent),
            Some(after_fork_in_child),
        ) == 0
    }
}

pub(crate) extern "C" fn before_fork() {
    ENGINE.before_fork(&RealOs);
}

pub(crate) extern "C" fn after_fork_in_parent() {
    ENGINE.after_fork_in_parent(&RealOs);
}

pub(crate) extern "C" fn after_fork_in_child() {
    crate::trace::refresh_pid();
    // Before the engine zeroes the counters: they may still be the
    // parent's file.
    crate::live::after_fork_in_child();
    ENGINE.after_fork_in_child(&RealOs);
}

fn report_config_error(e: ConfigError, value: Option<&[u8]>) {
    let mut buf = [0u8; 512];
    let mut w = LineWriter {
        buf: &mut buf,
        len: 0,
    };
    w.put(b"munmapq: ");
    w.put(e.var.as_bytes());
    w.put(b"=\"");
    let v = value.unwrap_or(b"");
    w.put(&v[..v.len().min(64)]);
    w.put(b"\" is not valid: it accepts ");
    w.put(e.accepts.as_bytes());
    w.put(b"; munmapq is off for this process (every call passes through)\n");
    let n = w.len;
    write_all(2, &buf[..n]);
}

fn remember_stats_file(path: Option<&[u8]>) {
    if let Some(path) = path {
        if !path.is_empty() && !path.starts_with(b"/") {
            // Opened again in each process's working directory, it would
            // scatter the lines (git -C repo: into the repository), as git
            // refuses a relative GIT_TRACE.
            stats_file_refused(path, b"is not valid: it accepts an absolute path");
            return;
        }
        if !path.is_empty() && path.len() < 4096 {
            // SAFETY: written once, in the constructor, before any reader
            // (the exit handler) can run.
            unsafe {
                let dst = &mut *core::ptr::addr_of_mut!(STATS_FILE);
                dst[..path.len()].copy_from_slice(path);
                dst[path.len()] = 0;
            }
            STATS_FILE_LEN.store(path.len(), Ordering::Release);
        }
    }
}

fn write_all(fd: libc::c_int, mut data: &[u8]) {
    if !crate::posix::fits_file_size_limit(fd, data.len()) {
        return;
    }
    while !data.is_empty() {
        // SAFETY: `data` is valid for its length.
        let n = unsafe { crate::selfio::write(fd, data.as_ptr().cast(), data.len()) };
        if n <= 0 {
            return;
        }
        data = &data[n as usize..];
    }
}

/// Opens `MUNMAPQ_STATS_FILE` for appending, if one was given; else the
/// error (0: none was given).
fn open_stats_file() -> Result<libc::c_int, libc::c_int> {
    if STATS_FILE_LEN.load(Ordering::Acquire) == 0 {
        return Err(0);
    }
    // SAFETY: STATS_FILE is NUL-terminated and only written before this.
    let fd = unsafe {
        let path = core::ptr::addr_of!(STATS_FILE).cast::<libc::c_char>();
        crate::selfio::open(
            path,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o600,
        )
    };
    match fd {
        fd if fd >= 0 => Ok(fd),
        // selfio: -errno on Linux, -1 and errno on macOS.
        _ if cfg!(target_os = "macos") => Err(crate::errno::get()),
        fd => Err(-fd),
    }
}

/// One line on stderr: `MUNMAPQ_STATS_FILE` is `path` and `why`; the
/// lines are not written.
fn stats_file_refused(path: &[u8], why: &[u8]) {
    let mut buf = [0u8; 512];
    let mut w = LineWriter {
        buf: &mut buf,
        len: 0,
    };
    w.put(b"munmapq: ");
    w.put(VAR_STATS_FILE.as_bytes());
    w.put(b"=\"");
    w.put(&path[..path.len().min(256)]);
    w.put(b"\" ");
    w.put(why);
    w.put(b"; this process's counters are not written\n");
    let n = w.len;
    write_all(2, &buf[..n]);
}

fn append_to_stats_file(line: &[u8]) {
    if let Ok(fd) = open_stats_file() {
        write_all(fd, line);
        // SAFETY: our own descriptor.
        unsafe { crate::selfio::close(fd) };
    }
}

/// Tells the launcher this process has the library, at load time (a process
/// that execs, calls `_exit` or dies by a signal never reaches the exit
/// handler).
fn announce_load() {
    if STATS_FILE_LEN.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut buf = [0u8; 64];
    let n = stats::write_loaded_line(crate::selfio::getpid() as u64, &mut buf);
    let fd = match open_stats_file() {
        Ok(fd) => fd,
        Err(e) => {
            stats_file_unusable(e);
            return;
        }
    };
    write_all(fd, &buf[..n]);
    // SAFETY: our own descriptor.
    unsafe { crate::selfio::close(fd) };
}

/// `MUNMAPQ_STATS_FILE` cannot be opened (`e`): said once, at load, and not
/// tried again at exit; not under the launcher, whose directory is gone
/// for a process that outlives it.
fn stats_file_unusable(e: libc::c_int) {
    let len = STATS_FILE_LEN.swap(0, Ordering::AcqRel);
    if UNDER_LAUNCHER.load(Ordering::Relaxed) {
        return;
    }
    let mut why = [0u8; 64];
    let mut w = LineWriter {
        buf: &mut why,
        len: 0,
    };
    w.put(b"cannot be opened: ");
    w.put(crate::errno::phrase(e));
    let n = w.len;
    // SAFETY: written once, in the constructor, before this reader (which
    // runs in the constructor too, after it).
    let path = unsafe { &(&*core::ptr::addr_of!(STATS_FILE))[..len] };
    stats_file_refused(path, &why[..n]);
}

/// What is said on stderr under `MUNMAPQ_STATS=1` when the hooks are not
/// bound.
const NOT_INTERPOSED_LINE: &[u8] = b"munmapq: loaded, not interposed: this process's calls do not reach the library's hooks; munmapq is off here\n";

/// Whether the program's calls reach the hooks (`real::interposed`),
/// asked once, here in the constructor (never inside a hook).
///
/// macOS: dyld checks the permission to read `DYLD_*` variables and the
/// permission to interpose apart (dyld `DyldProcessConfig.cpp`
/// `ProcessConfig::Security::Security`: `allowEnvVarsPath` from
/// `AMFI_DYLD_OUTPUT_ALLOW_PATH_VARS`, `allowInterposing` from
/// `AMFI_DYLD_OUTPUT_ALLOW_LIBRARY_INTERPOSING`): a process may load this
/// image and run this constructor with no pair of its `__interpose` table
/// applied (`DyldRuntimeState.cpp` `appendInterposingTuples` returns at
/// once without the permission). dlsym's answer is interposed
/// (`Loader.cpp` `Loader::hasExportedSymbol`: `targetAddressForDlsym =
/// interpose(state, ...)`), and the tables are built before any
/// initializer runs (`dyldMain.cpp`: `buildInterposingTables` before
/// `runAllInitializersForMain`): with the pairs applied
/// `dlsym(RTLD_DEFAULT, "mmap")` is the hook, without them libSystem's
/// own `mmap`.
///
/// Linux: the same when the library was loaded by `dlopen` rather than
/// `LD_PRELOAD` (it then comes after libc). Another interposer in front of
/// this one (a sanitizer runtime preloaded first) may call through to the
/// hook: that counts as interposed.
fn interposed() -> bool {
    real::interposed()
}

/// Tells the launcher this process loaded the library but its calls do not
/// reach the hooks (after its load line).
fn announce_not_interposed() {
    if STATS_FILE_LEN.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut buf = [0u8; 64];
    let n = stats::write_not_interposed_line(crate::selfio::getpid() as u64, &mut buf);
    append_to_stats_file(&buf[..n]);
}

/// At exit: the counters, on stderr (`MUNMAPQ_STATS=1`) and/or appended to
/// `MUNMAPQ_STATS_FILE` as one line (one `write`, so concurrent processes'
/// lines do not interleave). Written even when munmapq is off, so the
/// launcher can tell that the library was loaded; not when no report was
/// asked for (no system call at all then), nor under a seccomp filter
/// (`SANDBOXED`: getpid or open could be what it kills).
extern "C" fn at_exit() {
    let asked =
        STATS_TO_STDERR.load(Ordering::Relaxed) || STATS_FILE_LEN.load(Ordering::Acquire) != 0;
    if !asked || SANDBOXED.load(Ordering::Relaxed) {
        return;
    }
    let mut buf = [0u8; 1024];
    let pid = crate::selfio::getpid() as u64;
    let n = ENGINE.stats.write_line(pid, &mut buf);
    if STATS_TO_STDERR.load(Ordering::Relaxed) {
        write_all(2, &buf[..n]);
    }
    if crate::live::at_exit() {
        append_to_stats_file(&buf[..n]);
    }
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".fini_array"]
static AT_EXIT: extern "C" fn() = at_exit;

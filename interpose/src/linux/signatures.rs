//! Every Linux hook's C arguments (`args::NAME`) and result (`ret::NAME`),
//! generated from `hook_table!` (see `crate::signatures!`): what the hooks'
//! bodies take and answer.

use crate::signatures;
use libc::{c_char, c_int, c_long, c_uint, c_ulong, c_void, off_t, size_t, FILE};
use libc::{iovec, pid_t, rlimit, ssize_t};

super::hook_table!(signatures);

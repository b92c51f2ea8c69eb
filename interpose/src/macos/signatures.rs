//! Every macOS hook's C arguments (`args::NAME`) and result (`ret::NAME`),
//! generated from `hook_table!` (see `crate::signatures!`): what the hooks'
//! bodies take and answer.

use super::real::libsystem::vm_behavior_t;
use crate::signatures;
use libc::{c_char, c_int, c_uint, c_void, off_t, pid_t, size_t};
use libc::{
    kern_return_t, mach_vm_address_t, mach_vm_size_t, vm_address_t, vm_inherit_t, vm_map_t,
    vm_prot_t, vm_size_t,
};

super::hook_table!(signatures);

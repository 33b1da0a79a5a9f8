//! The open-file limit and the connections it leaves room for.

/// Descriptors kept free of connections for the node's own use: the store's files and the
/// data-directory probe, the peers' connections, the runtime's (about 15 at rest). Half the limit
/// when the limit is small.
const RESERVED_FILES: u64 = 256;

/// Raises this process's soft open-file limit to its hard limit, as Go's runtime does, and
/// answers the soft limit then in force (`None`: it cannot be read). A soft limit of 1,024 is a
/// common default under a much higher hard one.
pub fn raise_open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `getrlimit` and `setrlimit` only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return None;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    // `rlim_t` is `u64` on Linux, not on every target.
    #[allow(clippy::useless_conversion)]
    Some(u64::try_from(limit.rlim_cur).unwrap_or(u64::MAX))
}

/// The connections the node admits: `requested` (`--max-connections`), or fewer when the
/// open-file limit would run out first. A node out of descriptors cannot write its data
/// directory and stops (`failstop`), so a client holding idle connections could take it down.
pub fn admitted_connections(requested: usize, open_files: Option<u64>) -> usize {
    let Some(open_files) = open_files else { return requested };
    let for_connections = open_files.saturating_sub(RESERVED_FILES.min(open_files / 2));
    requested.min(usize::try_from(for_connections).unwrap_or(usize::MAX)).max(1)
}

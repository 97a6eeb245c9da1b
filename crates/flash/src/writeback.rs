//! Write-behind for buffered output files: the kernel starts writing what a writer has
//! finished while the writer goes on, so the final `fsync` finds little left to do.

use std::fs::File;
use std::os::fd::AsRawFd as _;

/// Starts writing back the dirty pages of `file` in `[offset, offset + len)` without waiting
/// for them (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`). A hint: nothing is durable
/// until an `fsync`, which also reports any error of this writeback, so a caller may ignore
/// the result. A range past what `off_t` holds does nothing.
///
/// # Errors
/// What `sync_file_range` answers (`EBADF`, `ESPIPE` for a pipe, `EIO`…).
pub fn start_writeback(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Ok(());
    };
    // SAFETY: sync_file_range takes a file descriptor and integers, no memory; `file` keeps
    // the descriptor open for the duration of the call.
    let r = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn writeback_of_a_written_range_succeeds_and_keeps_the_bytes() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[7u8; 8192]).unwrap();
        start_writeback(&f, 0, 8192).unwrap();
        // Past the end and beyond off_t: nothing to do, no error.
        start_writeback(&f, 1 << 40, 4096).unwrap();
        start_writeback(&f, u64::MAX, 1).unwrap();
        f.sync_all().unwrap();
        let mut back = vec![0u8; 8192];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut back, 0).unwrap();
        assert!(back.iter().all(|&b| b == 7));
    }
}

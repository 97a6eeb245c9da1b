//! An aligned, zero-initialised byte buffer for O_DIRECT I/O.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// A heap buffer whose address is a multiple of its alignment (a power of two, at least 4096
/// here), as O_DIRECT wants. Zeroed when allocated; `Deref`s to `[u8]`.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the buffer owns its allocation exclusively (no aliasing pointers escape beyond
// borrows tied to `&self`/`&mut self`), so moving it to another thread is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only ever hands out `&[u8]`, which is `Sync`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (at least 1) aligned to `align` (rounded up to a power
    /// of two and to at least 4096). `None` when the layout is impossible or allocation fails.
    #[must_use]
    pub fn new(len: usize, align: usize) -> Option<Self> {
        let align = align.max(4096).checked_next_power_of_two()?;
        let layout = Layout::from_size_align(len.max(1), align).ok()?;
        // SAFETY: `layout` has a non-zero size (len.max(1)) and a valid power-of-two alignment.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        NonNull::new(raw).map(|ptr| AlignedBuf { ptr, layout })
    }

    /// The alignment of the address.
    #[must_use]
    pub fn align(&self) -> usize {
        self.layout.align()
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `layout.size()` initialised (zeroed at allocation) bytes
        // owned by `self`; the borrow is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by `alloc_zeroed` with exactly this `layout` and is
        // freed only here, once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.layout.size())
            .field("align", &self.layout.align())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for (len, align) in [(1, 1), (4096, 512), (10_000, 4096), (1 << 20, 8192)] {
            let mut b = AlignedBuf::new(len, align).unwrap();
            assert_eq!(b.as_ptr() as usize % align.max(4096), 0);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
            b[len - 1] = 7;
            assert_eq!(b[len - 1], 7);
        }
    }
}

//! What the writer writes to: the [`Device`] trait, implemented by [`Target`](crate::Target)
//! and by the fault-injecting [`FaultDevice`](crate::FaultDevice) of the tests.

use std::io;

/// A place the writer can write to: offsets and lengths multiples of [`Device::block_size`],
/// buffers aligned to [`Device::mem_align`].
pub trait Device: Send {
    /// Size in bytes, `None` for a regular file (it grows).
    fn size(&self) -> Option<u64>;
    /// Offset and length granularity (logical block size or DIO offset alignment).
    fn block_size(&self) -> u32;
    /// Buffer address alignment.
    fn mem_align(&self) -> usize;
    /// Writes at `offset`; returns how many bytes the device took (may be short).
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<usize>;
    /// Reads at `offset`; returns how many bytes were read (short at the end).
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Flushes written data to the medium (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Makes later reads come from the medium rather than a cache (buffered targets).
    fn drop_cache(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// Discards (BLKDISCARD) `[offset, offset+len)`. `Unsupported` where it makes no sense.
    fn discard(&mut self, _offset: u64, _len: u64) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Called once before anything is read or written: a regular file is emptied, so that
    /// the holes of the image read as zeros and the file ends up byte-identical to it.
    fn prepare(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// Whether bytes the writer does not write read as zeros afterwards (a regular file,
    /// emptied by [`Device::prepare`]); otherwise they keep their old contents.
    fn holes_read_zero(&self) -> bool {
        false
    }
    /// Called once after the last write and sync with the image size: a regular file is
    /// cut or grown to exactly that length.
    fn finish(&mut self, _image_size: u64) -> io::Result<()> {
        Ok(())
    }
    /// Whether is a whole disk whose partition table the kernel should re-read.
    fn is_disk(&self) -> bool {
        false
    }
    /// Asks the kernel to re-read the partition table (BLKRRPART).
    fn reread_partitions(&mut self) -> io::Result<()> {
        Ok(())
    }
}

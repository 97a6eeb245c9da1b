//! A fault-injecting, alignment-checking in-memory [`Device`] for tests.

use std::io;

use crate::Device;

/// A fault to inject when a write reaches the offset given to [`FaultDevice::with_fault`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The write fails with EIO.
    Eio,
    /// The write fails with ENOSPC.
    Enospc,
    /// The write fails with EPERM (a read-only device that opened for writing).
    Eperm,
    /// The write takes the bytes up to the fault offset, then 0 bytes (the device ended).
    Short,
    /// `fdatasync` fails with EIO.
    SyncEio,
}

/// An in-memory device that rejects misaligned offsets, lengths and buffers with EINVAL (as
/// O_DIRECT does) and injects one [`Fault`] at a byte offset. It records every write.
#[derive(Debug, Clone)]
pub struct FaultDevice {
    /// The device bytes.
    pub data: Vec<u8>,
    /// Logical block size.
    pub block: u32,
    /// The injected fault and the offset where writes start to fail.
    pub fault: Option<(Fault, u64)>,
    /// Every successful write as `(offset, len)`, in order.
    pub writes: Vec<(u64, u64)>,
    /// Number of syncs.
    pub syncs: u32,
}

impl FaultDevice {
    /// A device of `data` (its old contents) with `block`-byte blocks and no fault.
    #[must_use]
    pub fn new(data: Vec<u8>, block: u32) -> Self {
        FaultDevice {
            data,
            block,
            fault: None,
            writes: Vec::new(),
            syncs: 0,
        }
    }

    /// The same with `fault` at `offset`.
    #[must_use]
    pub fn with_fault(mut self, fault: Fault, offset: u64) -> Self {
        self.fault = Some((fault, offset));
        self
    }

    fn check(&self, offset: u64, len: usize, addr: usize) -> io::Result<()> {
        let b = u64::from(self.block);
        if offset % b != 0 || (len as u64) % b != 0 || addr % 512 != 0 {
            return Err(io::Error::from_raw_os_error(22));
        }
        Ok(())
    }
}

impl Device for FaultDevice {
    fn size(&self) -> Option<u64> {
        Some(self.data.len() as u64)
    }
    fn block_size(&self) -> u32 {
        self.block
    }
    fn mem_align(&self) -> usize {
        4096
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<usize> {
        self.check(offset, buf.len(), buf.as_ptr() as usize)?;
        let end = offset.saturating_add(buf.len() as u64);
        let mut take = buf.len();
        if let Some((fault, at)) = self.fault {
            if end > at {
                match fault {
                    Fault::Eio => return Err(io::Error::from_raw_os_error(5)),
                    Fault::Enospc => return Err(io::Error::from_raw_os_error(28)),
                    Fault::Eperm => return Err(io::Error::from_raw_os_error(1)),
                    Fault::Short => take = usize::try_from(at.saturating_sub(offset)).unwrap_or(0),
                    Fault::SyncEio => {}
                }
            }
        }
        let len = self.data.len() as u64;
        if offset >= len {
            return Err(io::Error::from_raw_os_error(28));
        }
        take = take.min(usize::try_from(len - offset).unwrap_or(usize::MAX));
        let start = usize::try_from(offset).map_err(|_| io::Error::from_raw_os_error(22))?;
        let (Some(dst), Some(src)) = (self.data.get_mut(start..start + take), buf.get(..take))
        else {
            return Err(io::Error::from_raw_os_error(22));
        };
        dst.copy_from_slice(src);
        if take > 0 {
            self.writes.push((offset, take as u64));
        }
        Ok(take)
    }
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.check(offset, buf.len(), buf.as_ptr() as usize)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.data.len());
        let n = buf.len().min(self.data.len() - start);
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), self.data.get(start..start + n)) {
            dst.copy_from_slice(src);
        }
        Ok(n)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.syncs += 1;
        if matches!(self.fault, Some((Fault::SyncEio, _))) {
            return Err(io::Error::from_raw_os_error(5));
        }
        Ok(())
    }
}

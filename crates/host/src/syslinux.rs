//! `fat.bootloader = "syslinux"`: SYSLINUX installed into a FAT partition blockwise wrote.
//!
//! A tool bridge, as wic's bootimg-pcbios does it: the partition, as assembled, is copied
//! into a temporary file next to the output (a boot partition is small), `syslinux
//! --install` (the mtools-based installer of the Debian package syslinux, which needs no
//! privileges) writes its boot sector over blockwise's, keeping the BPB, and adds
//! `ldlinux.sys` and `ldlinux.c32`, and the result replaces the partition in the image by
//! reference (nothing is read into memory). mtools stamps the files it writes with
//! `SOURCE_DATE_EPOCH` (set to the build's timestamp, at least 1980, in UTC), so the same
//! spec and inputs give the same bytes. The result is checked before it is used: the boot
//! sector must carry syslinux's name and the BPB blockwise wrote, else the build fails. On
//! FAT32 the new boot sector is copied to the backup boot sector, which the installer leaves
//! alone (fsck.fat would report the two differ).

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use blockwise_geometry::{BlockSink, BlockSource, ContentRef, ImageMap};

/// Errors of the syslinux installer bridge.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyslinuxError {
    /// `syslinux` is not on `PATH`.
    #[error("syslinux not found on PATH: fat.bootloader = \"syslinux\" needs the syslinux installer (install the Debian package syslinux)")]
    Missing,
    /// The installer ran and failed.
    #[error("syslinux --install failed ({status}): {stderr}")]
    Failed {
        /// Exit status.
        status: String,
        /// What it printed (trimmed).
        stderr: String,
    },
    /// The installer reported success but the boot sector is not what it should be.
    #[error("syslinux --install left {what}; the image is not written")]
    Unexpected {
        /// What was found.
        what: &'static str,
    },
    /// Temporary file I/O failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Reading the assembled partition or placing the result failed.
    #[error("the partition at byte {offset}: {message}")]
    Image {
        /// Partition offset in the image.
        offset: u64,
        /// The image's error.
        message: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SyslinuxError + '_ {
    move |source| SyslinuxError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `.blockwise-syslinux-TAG.img`: one partition being installed into.
const TEMP_PREFIX: &str = ".blockwise-syslinux-";

/// The installer's result, removed on drop (the image refers to it until written).
#[derive(Debug)]
pub(crate) struct TempImage(PathBuf);

impl Drop for TempImage {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// FAT times start in 1980; mtools wraps earlier ones.
const FAT_EPOCH: i64 = 315_532_800;
/// The last second FAT times hold (2107-12-31 23:59:58).
const FAT_END: i64 = 4_354_819_198;

/// `syslinux` on `PATH`.
fn find_syslinux() -> Result<PathBuf, SyslinuxError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("syslinux"))
        .find(|p| p.is_file())
        .ok_or(SyslinuxError::Missing)
}

/// Bytes of the boot sector syslinux must keep: the BPB, FAT32's extension included
/// (0x0B..0x5A; a FAT12/16 boot sector's code starting at 0x3E is replaced).
fn bpb(sector: &[u8], fat32: bool) -> &[u8] {
    let end = if fat32 { 0x5a } else { 0x3e };
    sector.get(0x0b..end).unwrap_or_default()
}

/// Installs syslinux into the FAT partition at `start..start + size` of `image`: copies it
/// out, runs the installer, checks and places the result. `timestamp` stamps the files the
/// installer adds.
pub(crate) fn install(
    image: &mut ImageMap,
    content: &mut crate::HostContent,
    start: u64,
    size: u64,
    fat32: bool,
    work_dir: &Path,
    timestamp: i64,
) -> Result<TempImage, SyslinuxError> {
    let tool = find_syslinux()?;
    let image_err = |message: String| SyslinuxError::Image {
        offset: start,
        message,
    };
    crate::output::remove_stale_in(work_dir, TEMP_PREFIX, ".img");
    let tag = crate::output::unique_tag();
    let img = work_dir.join(format!("{TEMP_PREFIX}{tag}.img"));
    // Created exclusively (never another build's file), and removed from then on.
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&img)
        .map_err(io_err(&img))?;
    let guard = TempImage(img.clone());
    f.set_len(size).map_err(io_err(&img))?;
    let mut before = vec![0u8; 512];
    {
        let reader = image.reader(&*content);
        let mut buf = vec![0u8; 1 << 20];
        let mut off = 0u64;
        while off < size {
            let n = usize::try_from((size - off).min(1 << 20)).unwrap_or(1 << 20);
            let chunk = &mut buf[..n];
            reader
                .read_at(start + off, chunk)
                .map_err(|e| image_err(e.to_string()))?;
            if off == 0 {
                let m = before.len().min(n);
                before[..m].copy_from_slice(&chunk[..m]);
            }
            if chunk.iter().any(|&b| b != 0) {
                use std::io::{Seek, SeekFrom};
                f.seek(SeekFrom::Start(off)).map_err(io_err(&img))?;
                f.write_all(chunk).map_err(io_err(&img))?;
            }
            off += n as u64;
        }
    }
    f.sync_all().map_err(io_err(&img))?;
    drop(f);
    let mut cmd = Command::new(&tool);
    // mtools reads MTOOLS_* settings (name mangling, case) from the environment: none of the
    // user's may change the bytes.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("MTOOLS") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .arg("--install")
        .arg(&img)
        .env(
            "SOURCE_DATE_EPOCH",
            timestamp.clamp(FAT_EPOCH, FAT_END).to_string(),
        )
        .env("TZ", "UTC")
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                SyslinuxError::Missing
            } else {
                SyslinuxError::Failed {
                    status: e.to_string(),
                    stderr: String::new(),
                }
            }
        })?;
    if !out.status.success() {
        return Err(SyslinuxError::Failed {
            status: out.status.to_string(),
            stderr: blockwise_geometry::display_str(String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    let mut after = vec![0u8; 512];
    let mut f = File::open(&img).map_err(io_err(&img))?;
    f.read_exact(&mut after).map_err(io_err(&img))?;
    if after.get(3..11) != Some(&b"SYSLINUX"[..]) {
        return Err(SyslinuxError::Unexpected {
            what: "a boot sector without syslinux's name (SYSLINUX at byte 3)",
        });
    }
    if bpb(&after, fat32) != bpb(&before, fat32) || after.get(510..) != Some(&[0x55, 0xaa][..]) {
        return Err(SyslinuxError::Unexpected {
            what: "a boot sector whose BPB differs from the one blockwise wrote",
        });
    }
    if f.metadata().map_err(io_err(&img))?.len() != size {
        return Err(SyslinuxError::Unexpected {
            what: "a partition file of another size",
        });
    }
    drop(f);
    if fat32 {
        // The installer leaves FAT32's backup boot sector (BPB_BkBootSec, within the reserved
        // sectors) as blockwise wrote it; fsck.fat and verify compare the two.
        let backup = u64::from(u16::from_le_bytes([after[0x32], after[0x33]]));
        let reserved = u64::from(u16::from_le_bytes([after[0x0e], after[0x0f]]));
        if backup != 0 && backup < reserved {
            use std::io::{Seek, SeekFrom};
            let mut w = fs::OpenOptions::new()
                .write(true)
                .open(&img)
                .map_err(io_err(&img))?;
            w.seek(SeekFrom::Start(backup * 512))
                .map_err(io_err(&img))?;
            w.write_all(&after).map_err(io_err(&img))?;
            w.sync_all().map_err(io_err(&img))?;
        }
    }
    place(image, content, start, size, &img).map_err(|e| match e {
        Place::Io(e) => e,
        Place::Image(m) => image_err(m),
    })?;
    Ok(guard)
}

enum Place {
    Io(SyslinuxError),
    Image(String),
}

/// Replaces `start..start + size` of `image` with the file `img`: zeros first (which
/// empties the range), then every non-zero 4 KiB run by reference.
fn place(
    image: &mut ImageMap,
    content: &mut crate::HostContent,
    start: u64,
    size: u64,
    img: &Path,
) -> Result<(), Place> {
    let zeros = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < size {
        let n = usize::try_from((size - off).min(1 << 20)).unwrap_or(1 << 20);
        image
            .write_at(start + off, &zeros[..n])
            .map_err(|e| Place::Image(e.to_string()))?;
        off += n as u64;
    }
    let mut f = File::open(img).map_err(|e| Place::Io(io_err(img)(e)))?;
    let md = f.metadata().map_err(|e| Place::Io(io_err(img)(e)))?;
    let id = content.add(img.to_path_buf(), &md);
    let put = |a: u64, b: u64, image: &mut ImageMap| -> Result<(), Place> {
        let r = ContentRef {
            content: id,
            offset: a,
            len: b - a,
        };
        image
            .write_content(start + a, r, &*content)
            .map_err(|e| Place::Image(e.to_string()))
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    let mut run: Option<u64> = None;
    while off < size {
        let n = usize::try_from((size - off).min(1 << 20)).unwrap_or(1 << 20);
        f.read_exact(&mut buf[..n])
            .map_err(|e| Place::Io(io_err(img)(e)))?;
        for (k, chunk) in buf[..n].chunks(4096).enumerate() {
            let at = off + (k as u64) * 4096;
            match (chunk.iter().any(|&b| b != 0), run) {
                (true, None) => run = Some(at),
                (false, Some(a)) => {
                    put(a, at, image)?;
                    run = None;
                }
                _ => {}
            }
        }
        off += n as u64;
    }
    if let Some(a) = run {
        put(a, size, image)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tool_names_the_package() {
        let e = SyslinuxError::Missing.to_string();
        assert!(e.contains("Debian package syslinux"), "{e}");
        assert!(e.contains("fat.bootloader"), "{e}");
    }

    #[test]
    fn bpb_ranges() {
        let mut s = vec![0u8; 512];
        s[0x0b] = 2;
        s[0x50] = 9;
        assert_eq!(bpb(&s, false).len(), 0x3e - 0x0b);
        assert_eq!(bpb(&s, true).len(), 0x5a - 0x0b);
        assert_eq!(bpb(&s[..20], true), b"");
    }
}

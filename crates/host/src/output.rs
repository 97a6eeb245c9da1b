//! Output files: images written atomically with their holes kept, and `.bmap` files.

use std::fs::{self, File};
use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::Path;

use blockwise_geometry::SparseImage;

use crate::Error;

/// Writes `img` to `path` atomically: a temp file next to it (holes kept), fsync, rename.
/// On any error the temp file is removed and `path` is untouched.
pub fn write_image_file(img: &SparseImage, path: &Path) -> Result<(), Error> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> Result<(), Error> {
        let f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.set_len(img.size()).map_err(|e| Error::io(&tmp, e))?;
        for (off, data) in img.extents() {
            f.write_all_at(data, off).map_err(|e| Error::io(&tmp, e))?;
        }
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes a bmaptool-compatible block map (format 2.0, SHA-256, 4 KiB blocks) of `img`:
/// every range that was written (data or explicit zeros) is mapped. Atomic like the image.
pub fn write_bmap(img: &SparseImage, path: &Path) -> Result<(), Error> {
    use blockwise_geometry::BlockSource;
    use sha2::{Digest, Sha256};
    const BS: u64 = 4096;
    let size = img.size();
    let blocks = size.div_ceil(BS);
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for (s, e) in img.mapped_ranges() {
        let (b0, b1) = (s / BS, e.div_ceil(BS).saturating_sub(1));
        match ranges.last_mut() {
            Some(last) if b0 <= last.1 + 1 => last.1 = last.1.max(b1),
            _ => ranges.push((b0, b1)),
        }
    }
    let mut body = String::new();
    let mut mapped = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    for (b0, b1) in &ranges {
        mapped += b1 - b0 + 1;
        let mut h = Sha256::new();
        let start = b0 * BS;
        let end = ((b1 + 1) * BS).min(size);
        let mut off = start;
        while off < end {
            let n = usize::try_from((end - off).min(buf.len() as u64)).unwrap_or(0);
            let chunk = buf.get_mut(..n).unwrap_or_default();
            img.read_at(off, chunk)
                .map_err(|e| Error::io(path, std::io::Error::other(e.to_string())))?;
            h.update(&*chunk);
            off += n as u64;
        }
        let r = if b0 == b1 {
            format!("{b0}")
        } else {
            format!("{b0}-{b1}")
        };
        body.push_str(&format!(
            "        <Range chksum=\"{:x}\"> {r} </Range>\n",
            h.finalize()
        ));
    }
    let zeros = "0".repeat(64);
    let text = format!(
        "<?xml version=\"1.0\" ?>\n<!-- written by blockwise -->\n<bmap version=\"2.0\">\n    <ImageSize> {size} </ImageSize>\n    <BlockSize> {BS} </BlockSize>\n    <BlocksCount> {blocks} </BlocksCount>\n    <MappedBlocksCount> {mapped} </MappedBlocksCount>\n    <ChecksumType> sha256 </ChecksumType>\n    <BmapFileChecksum> {zeros} </BmapFileChecksum>\n    <BlockMap>\n{body}    </BlockMap>\n</bmap>\n"
    );
    let digest = format!("{:x}", Sha256::digest(text.as_bytes()));
    let text = text.replacen(&zeros, &digest, 1);
    let tmp = path.with_extension("bmap.tmp");
    let result = (|| -> Result<(), Error> {
        let mut f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(text.as_bytes())
            .map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

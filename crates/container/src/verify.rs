//! `verify` of any input: plain images as they are, containers decoded (random access where
//! the container allows it, rounds over a forward stream otherwise), refused formats named.
//! The report is the raw image's, field for field; the container is described beside it
//! ([`ContainerInfo`]) and added to the JSON and the header line by [`report_json`] and
//! [`report_human`].

use blockwise_geometry::{format_size, BlockSource};
use blockwise_verify::{Options, Report};
use serde::Serialize;

use crate::decode::rounds::run_in_rounds;
use crate::decode::Decoded;
use crate::open::{open, OpenError, Opened};
use crate::recognise::{ContainerKind, Refusal};
use crate::Error;

/// The container an image was verified through (`container` in the JSON report).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ContainerInfo {
    /// `android-sparse`, `xz`, `gzip`, `zstd`, `bzip2`, `lz4`, `zip`.
    pub kind: &'static str,
    /// The container, for messages.
    #[serde(skip)]
    pub container: ContainerKind,
    /// The container allows decoding any part without the ones before it (chunk map, seek
    /// table, several xz blocks, a stored zip entry).
    pub seekable: bool,
    /// The zip entry verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// The container file's size.
    pub container_bytes: u64,
    /// Bytes of the container file read.
    pub bytes_read: u64,
    /// Forward passes over a stream (0 with random access).
    #[serde(skip_serializing_if = "is_zero")]
    pub passes: u32,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's signature")]
fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl ContainerInfo {
    /// `zstd, seekable: 1.2 MiB of 310 MiB read`.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut s = self.container.name().to_string();
        if let Some(e) = &self.entry {
            s.push_str(&format!(" entry \"{}\"", crate::escape(e)));
        }
        if self.seekable {
            s.push_str(", seekable");
        } else if self.passes > 0 {
            s.push_str(&format!(
                ", stream decoded in {} pass{}",
                self.passes,
                if self.passes == 1 { "" } else { "es" }
            ));
        }
        s.push_str(&format!(
            ": {} of {} read",
            format_size(self.bytes_read),
            format_size(self.container_bytes)
        ));
        s
    }
}

/// Why an input could not be verified.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A format blockwise names and refuses (exit 2).
    #[error(transparent)]
    Refused(Refusal),
    /// A container that does not decode, or the input's own read error.
    #[error(transparent)]
    Decode(#[from] Error),
}

impl From<OpenError> for VerifyError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Refused(r) => VerifyError::Refused(r),
            OpenError::Decode(d) => VerifyError::Decode(d),
        }
    }
}

/// Verifies any input: a plain image or device as it is, a container decoded. The report's
/// `size_bytes` is the image's; unknown bytes give `verify`'s own "unrecognised" report.
pub fn verify<I: BlockSource + 'static>(
    src: I,
    opts: &Options,
) -> Result<(Report, Option<ContainerInfo>), VerifyError> {
    match open(src)? {
        Opened::Plain { src, .. } => {
            let r = blockwise_verify::verify(&src, opts).map_err(|e| Error::Input(Box::new(e)))?;
            Ok((r, None))
        }
        Opened::Container { decoded, .. } => {
            let (r, info) = verify_decoded(&decoded, opts)?;
            Ok((r, Some(info)))
        }
    }
}

/// Verifies a decoded container: random access when every frame is small, rounds over the
/// stream otherwise.
pub fn verify_decoded<I: BlockSource + 'static>(
    d: &Decoded<I>,
    opts: &Options,
) -> Result<(Report, ContainerInfo), Error> {
    let (report, passes) = match d.random_access() {
        Some(ra) => (blockwise_verify::verify(&ra, opts)?, 0),
        None => {
            let (r, _, stats) = run_in_rounds(d, |rec| blockwise_verify::verify(rec, opts))?;
            let r: Report = match r {
                Ok(r) => r,
                Err(never) => match never {},
            };
            (r, stats.passes)
        }
    };
    let info = ContainerInfo {
        kind: d.kind().json_name(),
        container: d.kind(),
        seekable: d.seekable(),
        entry: d.entry().map(str::to_string),
        container_bytes: d.container_len(),
        bytes_read: d.bytes_read(),
        passes,
    };
    Ok((report, info))
}

/// The JSON report with `container` after `source` (absent for a plain image, so its
/// report is unchanged).
pub fn report_json(
    report: &Report,
    info: Option<&ContainerInfo>,
) -> Result<serde_json::Value, serde_json::Error> {
    let v = serde_json::to_value(report)?;
    let (Some(info), serde_json::Value::Object(map)) = (info, &v) else {
        return Ok(v);
    };
    let mut out = serde_json::Map::new();
    for (k, val) in map {
        out.insert(k.clone(), val.clone());
        if k == "source" {
            out.insert("container".into(), serde_json::to_value(info)?);
        }
    }
    Ok(serde_json::Value::Object(out))
}

/// The human report with the container in its header line:
/// `Disk os.img.zst (zstd, seekable: 1.2 MiB of 310 MiB read): 8 GiB, ...`.
#[must_use]
pub fn report_human(report: &Report, info: Option<&ContainerInfo>) -> String {
    let text = report.to_human();
    let Some(info) = info else {
        return text;
    };
    let prefix = format!("Disk {}:", report.source);
    match text.strip_prefix(&prefix) {
        Some(rest) => format!("Disk {} ({}):{rest}", report.source, info.describe()),
        None => format!("Container: {}\n{text}", info.describe()),
    }
}

//! Spec files: a [`Spec`] read from disk, with the directory its relative paths are
//! resolved against, and the build time from the spec or the environment.

use std::fs;
use std::path::{Path, PathBuf};

use blockwise_image::Spec;

use crate::Error;

/// A spec read from a file, with the directory its relative paths are resolved against.
#[derive(Clone, Debug)]
pub struct SpecFile {
    /// The parsed spec.
    pub spec: Spec,
    /// Directory of the spec file.
    pub base_dir: PathBuf,
}

impl SpecFile {
    /// Reads and validates a TOML spec file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        // A syntax error has no key: name the file instead (`spec.toml: TOML parse error …`).
        let spec = Spec::from_toml(&text).map_err(|mut e| {
            if e.key == "(toml)" {
                e.key = path.display().to_string();
            }
            e
        })?;
        let base_dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let base_dir = if base_dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base_dir
        };
        Ok(SpecFile { spec, base_dir })
    }

    /// A spec built in code, with relative paths resolved against `base_dir`.
    #[must_use]
    pub fn new(spec: Spec, base_dir: PathBuf) -> Self {
        SpecFile { spec, base_dir }
    }

    /// A path of the spec, relative to the spec file's directory.
    #[must_use]
    pub fn resolve(&self, rel: &str) -> PathBuf {
        self.base_dir.join(rel)
    }
}

/// The file-creation time: spec `timestamp`, else `SOURCE_DATE_EPOCH`, else 0.
#[must_use]
pub fn resolve_timestamp(spec: &Spec) -> i64 {
    spec.image
        .timestamp
        .and_then(|t| i64::try_from(t).ok())
        .or_else(|| {
            std::env::var("SOURCE_DATE_EPOCH")
                .ok()
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

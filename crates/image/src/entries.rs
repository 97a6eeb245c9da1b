//! `[[partition.entry]]` overrides applied to a [`Tree`]: ownership, modes, xattrs and the
//! special files a build without root cannot take from disk. Pure: the bindings and the
//! browser build apply entries the same way as the CLI.

use blockwise_geometry::{Meta, NodeKind, Tree};

use crate::spec::{EntryKind, EntrySpec, SpecError};
use crate::Error;

/// Applies `[[partition.entry]]` overrides and creates the special files they declare.
pub fn apply_entries(
    tree: &mut Tree,
    entries: &[EntrySpec],
    key: &str,
    timestamp: i64,
) -> Result<(), Error> {
    for (j, en) in entries.iter().enumerate() {
        let ek = |k: &str| format!("{key}.entry[{}].{k}", j + 1);
        let existing = tree.lookup(&en.path);
        let id = match (existing, en.kind) {
            (Some(id), _) => {
                if let Some(node) = tree.nodes.get(id) {
                    let same = matches!(
                        (en.kind, &node.kind),
                        (EntryKind::Existing, _)
                            | (EntryKind::File, NodeKind::File { .. })
                            | (EntryKind::Dir, NodeKind::Dir { .. })
                    );
                    if !same {
                        return Err(SpecError::new(
                            ek("kind"),
                            format!(
                                "{} already exists in contents as a different kind of file",
                                en.path
                            ),
                        )
                        .into());
                    }
                }
                id
            }
            (None, EntryKind::Existing) => {
                return Err(SpecError::new(
                    ek("path"),
                    format!(
                        "{} is not in contents; give kind = \"file\", \"dir\", … to create it",
                        en.path
                    ),
                )
                .into())
            }
            (None, kind) => {
                let (parent_path, name) =
                    en.path.rsplit_once('/').unwrap_or(("", en.path.as_str()));
                // Create missing parent directories (root-owned, 0755).
                let mut parent = 0;
                for comp in parent_path.split('/').filter(|c| !c.is_empty()) {
                    parent = match tree.child(parent, comp) {
                        Some(c) => c,
                        None => tree
                            .add(
                                parent,
                                comp,
                                NodeKind::Dir {
                                    children: Vec::new(),
                                },
                                Meta {
                                    mode: 0o755,
                                    mtime: timestamp,
                                    ..Meta::default()
                                },
                            )
                            .ok_or_else(|| {
                                SpecError::new(
                                    ek("path"),
                                    format!("{comp} in {} is not a directory", en.path),
                                )
                            })?,
                    };
                }
                let (node_kind, mode) = match kind {
                    EntryKind::File => (
                        NodeKind::File {
                            size: 0,
                            content: u64::MAX,
                            data_ranges: None,
                            link: None,
                        },
                        0o644,
                    ),
                    EntryKind::Dir => (
                        NodeKind::Dir {
                            children: Vec::new(),
                        },
                        0o755,
                    ),
                    EntryKind::Symlink => (
                        NodeKind::Symlink {
                            target: en.target.clone().unwrap_or_default().into_bytes(),
                        },
                        0o777,
                    ),
                    EntryKind::Char => (
                        NodeKind::CharDev {
                            major: en.major.unwrap_or(0),
                            minor: en.minor.unwrap_or(0),
                        },
                        0o600,
                    ),
                    EntryKind::Block => (
                        NodeKind::BlockDev {
                            major: en.major.unwrap_or(0),
                            minor: en.minor.unwrap_or(0),
                        },
                        0o600,
                    ),
                    EntryKind::Fifo => (NodeKind::Fifo, 0o644),
                    EntryKind::Socket | EntryKind::Existing => (NodeKind::Socket, 0o755),
                };
                tree.add(
                    parent,
                    name,
                    node_kind,
                    Meta {
                        mode,
                        mtime: timestamp,
                        ..Meta::default()
                    },
                )
                .ok_or_else(|| {
                    SpecError::new(
                        ek("path"),
                        format!("the parent of {} is not a directory", en.path),
                    )
                })?
            }
        };
        if let Some(node) = tree.nodes.get_mut(id) {
            if let Some(m) = en.mode {
                node.meta.mode = m;
            }
            if let Some(u) = en.uid {
                node.meta.uid = u;
            }
            if let Some(g) = en.gid {
                node.meta.gid = g;
            }
            for (name, value) in &en.xattrs {
                node.meta.xattrs.retain(|(n, _)| n != name);
                node.meta.xattrs.push((name.clone(), value.clone()));
            }
            node.meta.xattrs.sort();
        }
    }
    Ok(())
}

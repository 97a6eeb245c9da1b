//! An in-memory description of a directory tree to put into a filesystem. Metadata lives
//! here; file *contents* are read on demand through [`ContentSource`], so memory grows with
//! the number of files, not their size. The image crate builds a `Tree` from a host
//! directory (plus the spec's `[[partition.entry]]` overrides); the bindings can build one
//! from memory.

/// Index of a node in [`Tree::nodes`]. The root directory is node 0.
pub type NodeId = usize;

/// File metadata.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Meta {
    /// Permission bits including setuid/setgid/sticky (`0o7777` mask), without the file type.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification time, seconds since the Unix epoch.
    pub mtime: i64,
    /// Nanoseconds part of the modification time.
    pub mtime_nsec: u32,
    /// Extended attributes, sorted by name: `(full name like "security.capability", value)`.
    pub xattrs: Vec<(String, Vec<u8>)>,
}

/// What a node is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A directory; children sorted by name (byte order).
    Dir {
        /// Child node ids.
        children: Vec<NodeId>,
    },
    /// A regular file.
    File {
        /// Size in bytes.
        size: u64,
        /// Handle passed to [`ContentSource::read_at`].
        content: u64,
        /// Byte ranges `[start, end)` that hold data, ascending; `None` = the whole file.
        /// Everything else is a hole (reads as zeros; filesystems that can, keep it sparse).
        data_ranges: Option<Vec<(u64, u64)>>,
        /// Nodes with the same `Some(link)` are hard links to one file (one inode on ext4,
        /// copies on FAT).
        link: Option<u64>,
    },
    /// A symbolic link.
    Symlink {
        /// Target, stored verbatim (bytes, as Linux stores them).
        target: Vec<u8>,
    },
    /// A character device.
    CharDev {
        /// Major number.
        major: u32,
        /// Minor number.
        minor: u32,
    },
    /// A block device.
    BlockDev {
        /// Major number.
        major: u32,
        /// Minor number.
        minor: u32,
    },
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
}

/// Bytes a [`Name`] holds without a heap allocation.
const NAME_INLINE: usize = 22;

/// A file name: bytes, as Linux stores them. Names of up to 22 bytes (most) are held in the
/// value itself, longer ones on the heap: a tree of a million files keeps a million names,
/// and a heap allocation of a short name costs 32 bytes besides the 24 of a `Vec`.
/// Reads as a byte slice (`Deref<Target = [u8]>`); made from bytes, a `Vec<u8>` or a `&str`.
#[derive(Clone)]
pub struct Name(NameRepr);

#[derive(Clone)]
enum NameRepr {
    Inline(u8, [u8; NAME_INLINE]),
    Heap(Box<[u8]>),
}

impl Name {
    /// The name's bytes.
    #[must_use]
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            NameRepr::Inline(len, b) => b.get(..usize::from(*len)).unwrap_or_default(),
            NameRepr::Heap(b) => b,
        }
    }
}

impl Default for Name {
    fn default() -> Self {
        Name(NameRepr::Inline(0, [0; NAME_INLINE]))
    }
}

impl From<&[u8]> for Name {
    fn from(bytes: &[u8]) -> Self {
        let mut b = [0u8; NAME_INLINE];
        match (b.get_mut(..bytes.len()), u8::try_from(bytes.len())) {
            (Some(dst), Ok(len)) => {
                dst.copy_from_slice(bytes);
                Name(NameRepr::Inline(len, b))
            }
            _ => Name(NameRepr::Heap(bytes.into())),
        }
    }
}

impl From<Vec<u8>> for Name {
    fn from(bytes: Vec<u8>) -> Self {
        if bytes.len() <= NAME_INLINE {
            Name::from(bytes.as_slice())
        } else {
            Name(NameRepr::Heap(bytes.into_boxed_slice()))
        }
    }
}

impl From<&Vec<u8>> for Name {
    fn from(bytes: &Vec<u8>) -> Self {
        Name::from(bytes.as_slice())
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Name::from(s.as_bytes())
    }
}

impl<const N: usize> From<&[u8; N]> for Name {
    fn from(bytes: &[u8; N]) -> Self {
        Name::from(&bytes[..])
    }
}

impl core::ops::Deref for Name {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Name {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl core::borrow::Borrow<[u8]> for Name {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl core::fmt::Debug for Name {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}", display_bytes(self.as_slice()))
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Name {}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

impl core::hash::Hash for Name {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialEq<[u8]> for Name {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<&[u8]> for Name {
    fn eq(&self, other: &&[u8]) -> bool {
        self.as_slice() == *other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for Name {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_slice() == other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Name {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.as_slice() == *other
    }
}

impl PartialEq<Vec<u8>> for Name {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_slice() == other.as_bytes()
    }
}

/// One file, directory or special file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Name inside the parent (empty for the root): bytes, as Linux stores them. ext4 keeps
    /// any bytes but `/` and NUL; FAT needs UTF-8 (see [`Node::name_str`]).
    pub name: Name,
    /// Parent id (the root is its own parent).
    pub parent: NodeId,
    /// Kind and kind-specific data.
    pub kind: NodeKind,
    /// Metadata.
    pub meta: Meta,
}

impl Node {
    /// The name as UTF-8, `None` when it is not.
    #[must_use]
    pub fn name_str(&self) -> Option<&str> {
        core::str::from_utf8(&self.name).ok()
    }
}

/// A whole tree. `nodes[0]` is the root directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// All nodes; children are referenced by index.
    pub nodes: Vec<Node>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new(Meta {
            mode: 0o755,
            ..Meta::default()
        })
    }
}

impl Tree {
    /// A tree holding only a root directory with `meta`.
    #[must_use]
    pub fn new(meta: Meta) -> Self {
        Tree {
            nodes: vec![Node {
                name: Name::default(),
                parent: 0,
                kind: NodeKind::Dir {
                    children: Vec::new(),
                },
                meta,
            }],
        }
    }

    /// Adds a node under `parent` (which must be a directory), keeping children sorted.
    /// Returns `None` if `parent` is not a directory or the name exists already. `name` is
    /// bytes (`&str` works too).
    pub fn add(
        &mut self,
        parent: NodeId,
        name: impl AsRef<[u8]>,
        kind: NodeKind,
        meta: Meta,
    ) -> Option<NodeId> {
        let name = name.as_ref();
        let id = self.nodes.len();
        let pos = {
            let children = self.children(parent)?;
            match children.binary_search_by(|&c| {
                self.nodes
                    .get(c)
                    .map_or(&b""[..], |n| n.name.as_slice())
                    .cmp(name)
            }) {
                Ok(_) => return None,
                Err(p) => p,
            }
        };
        if let Some(Node {
            kind: NodeKind::Dir { children },
            ..
        }) = self.nodes.get_mut(parent)
        {
            children.insert(pos, id);
        }
        self.nodes.push(Node {
            name: Name::from(name),
            parent,
            kind,
            meta,
        });
        Some(id)
    }

    /// Children of a directory, `None` for other nodes.
    #[must_use]
    pub fn children(&self, id: NodeId) -> Option<&[NodeId]> {
        match self.nodes.get(id).map(|n| &n.kind) {
            Some(NodeKind::Dir { children }) => Some(children),
            _ => None,
        }
    }

    /// Looks up a child by exact name (bytes; `&str` works too).
    #[must_use]
    pub fn child(&self, dir: NodeId, name: impl AsRef<[u8]>) -> Option<NodeId> {
        let name = name.as_ref();
        let children = self.children(dir)?;
        // Children are sorted by name bytes.
        children
            .binary_search_by(|&c| {
                self.nodes
                    .get(c)
                    .map_or(&b""[..], |n| n.name.as_slice())
                    .cmp(name)
            })
            .ok()
            .and_then(|i| children.get(i).copied())
    }

    /// Resolves an absolute path like `/etc/shadow` (no symlinks followed).
    #[must_use]
    pub fn lookup(&self, path: &str) -> Option<NodeId> {
        let mut cur = 0;
        for comp in path.split('/').filter(|c| !c.is_empty()) {
            cur = self.child(cur, comp)?;
        }
        Some(cur)
    }

    /// The absolute path of a node as bytes.
    #[must_use]
    pub fn path_bytes(&self, id: NodeId) -> Vec<u8> {
        let mut parts = Vec::new();
        let mut cur = id;
        let mut guard = 0;
        while cur != 0 && guard < 4096 {
            match self.nodes.get(cur) {
                Some(n) => {
                    parts.push(n.name.as_slice());
                    cur = n.parent;
                }
                None => break,
            }
            guard += 1;
        }
        parts.reverse();
        let mut out = Vec::new();
        for p in parts {
            out.push(b'/');
            out.extend_from_slice(p);
        }
        if out.is_empty() {
            out.push(b'/');
        }
        out
    }

    /// The absolute path of a node, for error messages: bytes that are not UTF-8 are shown
    /// as `\xNN` escapes (so two different names never look the same).
    #[must_use]
    pub fn path(&self, id: NodeId) -> String {
        display_bytes(&self.path_bytes(id))
    }

    /// Total bytes of regular-file content (hard links counted once).
    #[must_use]
    pub fn content_bytes(&self) -> u64 {
        let mut seen = std::collections::BTreeSet::new();
        self.nodes
            .iter()
            .filter_map(|n| match &n.kind {
                NodeKind::File { size, link, .. } => {
                    if let Some(l) = link {
                        if !seen.insert(*l) {
                            return None;
                        }
                    }
                    Some(*size)
                }
                _ => None,
            })
            .sum()
    }
}

/// Bytes as text for messages: UTF-8 runs verbatim, except that control characters (C0,
/// DEL, C1) and the bidirectional-text overrides are escaped like bytes that are not UTF-8,
/// as `\xNN` per byte. A name with ESC or a newline then cannot drive the terminal or forge a
/// log line. Already-escaped text passes through unchanged (`display_str(display_str(s)) ==
/// display_str(s)`), so a message may be escaped again where it is printed.
#[must_use]
pub fn display_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        let (good, bad) = match core::str::from_utf8(rest) {
            Ok(s) => (s, &[][..]),
            Err(e) => {
                let (g, b) = rest.split_at(e.valid_up_to());
                (core::str::from_utf8(g).unwrap_or_default(), b)
            }
        };
        for c in good.chars() {
            if needs_escape(c) {
                let mut utf8 = [0u8; 4];
                for b in c.encode_utf8(&mut utf8).bytes() {
                    push_hex(&mut out, b);
                }
            } else {
                out.push(c);
            }
        }
        if bad.is_empty() {
            return out;
        }
        let n = core::str::from_utf8(bad)
            .err()
            .and_then(|e| e.error_len())
            .unwrap_or(bad.len())
            .max(1);
        for &b in bad.iter().take(n) {
            push_hex(&mut out, b);
        }
        rest = bad.get(n..).unwrap_or_default();
    }
}

/// [`display_bytes`] of a string: a name, label or message from the user or an image, ready to
/// print.
#[must_use]
pub fn display_str(s: &str) -> String {
    if s.chars().any(needs_escape) {
        display_bytes(s.as_bytes())
    } else {
        s.to_string()
    }
}

/// [`display_bytes`] of a path's bytes (its OS encoding: the bytes on Linux).
#[must_use]
pub fn display_path(p: &std::path::Path) -> String {
    display_bytes(p.as_os_str().as_encoded_bytes())
}

/// Characters a message must not print raw: C0 and C1 controls, DEL, and the bidirectional
/// embeddings, overrides and isolates (which reorder what a terminal shows).
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn push_hex(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('\\');
    out.push('x');
    for nibble in [b >> 4, b & 15] {
        out.push(char::from(
            HEX.get(usize::from(nibble)).copied().unwrap_or(b'0'),
        ));
    }
}

/// Reading file contents failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("reading file content #{content}: {message}")]
pub struct ContentError {
    /// The content handle.
    pub content: u64,
    /// What went wrong.
    pub message: String,
}

/// Where file contents come from: host files (image crate), memory (tests, bindings).
pub trait ContentSource {
    /// Fills `buf` with the bytes of content `content` at `offset`. Reading past the
    /// file's size is an error.
    fn read_at(&self, content: u64, offset: u64, buf: &mut [u8]) -> Result<(), ContentError>;
}

/// In-memory contents: handle `i` is `self[i]`.
impl ContentSource for Vec<Vec<u8>> {
    fn read_at(&self, content: u64, offset: u64, buf: &mut [u8]) -> Result<(), ContentError> {
        let err = |m: &str| ContentError {
            content,
            message: m.to_string(),
        };
        let data = usize::try_from(content)
            .ok()
            .and_then(|i| self.get(i))
            .ok_or_else(|| err("no such content"))?;
        let start = usize::try_from(offset).map_err(|_| err("offset out of range"))?;
        let end = start
            .checked_add(buf.len())
            .ok_or_else(|| err("offset out of range"))?;
        let src = data
            .get(start..end)
            .ok_or_else(|| err("read past the end"))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_and_lookup() {
        let mut t = Tree::default();
        let etc = t
            .add(
                0,
                "etc",
                NodeKind::Dir { children: vec![] },
                Meta::default(),
            )
            .unwrap();
        let f = t
            .add(
                etc,
                "passwd",
                NodeKind::File {
                    size: 3,
                    content: 0,
                    data_ranges: None,
                    link: None,
                },
                Meta::default(),
            )
            .unwrap();
        assert!(t
            .add(etc, "passwd", NodeKind::Fifo, Meta::default())
            .is_none());
        assert_eq!(t.lookup("/etc/passwd"), Some(f));
        assert_eq!(t.path(f), "/etc/passwd");
        assert_eq!(t.path(0), "/");
        let odd = t
            .add(etc, b"caf\xe9", NodeKind::Fifo, Meta::default())
            .unwrap();
        assert_eq!(t.path(odd), "/etc/caf\\xe9");
        assert_eq!(t.child(etc, b"caf\xe9"), Some(odd));
        assert_eq!(t.nodes[odd].name_str(), None);
        assert_eq!(display_bytes(b"a\xff\xfeb\xc3\xa9"), "a\\xff\\xfeb\u{e9}");
        // Control characters (ESC, newline, DEL, a C1 control, a bidi override) are escaped as
        // their bytes; escaping again changes nothing.
        let hostile = "x\u{1b}[2Jy\nz\u{7f}\u{85}\u{202e}\tok";
        let shown = display_str(hostile);
        assert_eq!(
            shown,
            "x\\x1b[2Jy\\x0az\\x7f\\xc2\\x85\\xe2\\x80\\xae\\x09ok"
        );
        assert_eq!(display_str(&shown), shown);
        assert_eq!(display_str("plain é"), "plain é");
        assert_eq!(
            display_path(std::path::Path::new("/tmp/a\u{1b}b")),
            "/tmp/a\\x1bb"
        );
        let content = vec![b"abc".to_vec()];
        let mut b = [0u8; 2];
        content.read_at(0, 1, &mut b).unwrap();
        assert_eq!(&b, b"bc");
        assert!(content.read_at(0, 2, &mut b).is_err());
    }

    /// A name reads back as the bytes it was made from, inline (up to 22 bytes) or on the
    /// heap, and compares, orders and hashes as those bytes.
    #[test]
    fn names_are_their_bytes() {
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let hash = |b: &[u8]| {
            let mut h = DefaultHasher::new();
            b.hash(&mut h);
            h.finish()
        };
        let mut all: Vec<Vec<u8>> = (0..=40).map(|n| vec![b'a' + (n % 26) as u8; n]).collect();
        all.push(b"caf\xe9\0/".to_vec());
        all.push(vec![0xff; 255]);
        for b in &all {
            for n in [
                Name::from(b.as_slice()),
                Name::from(b.clone()),
                Name::from(b),
            ] {
                assert_eq!(n.as_slice(), b.as_slice());
                assert_eq!(&n[..], b.as_slice());
                assert_eq!(n, *b);
                assert_eq!(n.len(), b.len());
                let mut h = DefaultHasher::new();
                n.hash(&mut h);
                assert_eq!(h.finish(), hash(b));
            }
        }
        let names: Vec<Name> = all.iter().map(Name::from).collect();
        for (a, na) in all.iter().zip(&names) {
            for (b, nb) in all.iter().zip(&names) {
                assert_eq!(na.cmp(nb), a.cmp(b));
                assert_eq!(na == nb, a == b);
            }
        }
        assert_eq!(Name::from("etc"), b"etc");
        assert_eq!(Name::from("etc"), "etc");
        assert!(Name::default().is_empty());
        assert_eq!(format!("{:?}", Name::from(&b"a\x1b"[..])), "\"a\\\\x1b\"");
        assert_eq!(core::mem::size_of::<Name>(), 24);
    }
}

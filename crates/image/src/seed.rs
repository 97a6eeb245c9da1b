//! `image.seed` resolved: the number a spec gives, a fresh one for `seed = "random"`, or, with
//! no `seed`, one derived from the spec and a fingerprint of its inputs (each partition's
//! tree as it will be written: names, kinds, sizes, modes, owners, times after the clamp,
//! link structure, xattrs; each raw source's size). Different images get different disk IDs,
//! partition GUIDs and filesystem UUIDs (two cards in one machine do not collide in
//! `/dev/disk/by-partuuid`), and the same spec with the same inputs the same bytes.

use blockwise_geometry::{NodeKind, SeedChoice, Tree};

use crate::Spec;

/// FNV-1a, 64 bits, over a stream of fields (each length-prefixed, so that field
/// boundaries count).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, b: &[u8]) {
        self.raw(&(b.len() as u64).to_le_bytes());
        self.raw(b);
    }

    fn raw(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn u64(&mut self, v: u64) {
        self.raw(&v.to_le_bytes());
    }

    /// SplitMix64 of the state: every bit of the input moves every bit of the seed.
    fn finish(&self) -> u64 {
        let mut z = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The seed derived from `spec` (its parsed form, `seed` itself left out), `trees` (spec
/// order) with times clamped to `clamp` as the writers clamp them, and the sizes of the
/// spec's raw sources (`[[partition]]` `source`s, then `[[raw]]`, in spec order).
#[must_use]
pub fn derived_seed(
    spec: &Spec,
    trees: &[Option<Tree>],
    raw_sizes: &[u64],
    clamp: Option<i64>,
) -> u64 {
    let mut h = Fnv::new();
    let mut s = spec.clone();
    s.image.seed = 0;
    s.image.seed_choice = SeedChoice::Derived;
    h.bytes(format!("{s:?}").as_bytes());
    for t in trees {
        let Some(t) = t else {
            h.u64(0);
            continue;
        };
        h.u64(t.nodes.len() as u64);
        for (id, n) in t.nodes.iter().enumerate() {
            h.bytes(&t.path_bytes(id));
            let m = &n.meta;
            h.u64(u64::from(m.mode));
            h.u64(u64::from(m.uid));
            h.u64(u64::from(m.gid));
            let mtime = clamp.map_or(m.mtime, |c| m.mtime.min(c));
            h.u64(mtime as u64);
            h.u64(u64::from(if clamp.is_some_and(|c| m.mtime > c) {
                0
            } else {
                m.mtime_nsec
            }));
            for (k, v) in &m.xattrs {
                h.bytes(k.as_bytes());
                h.bytes(v);
            }
            match &n.kind {
                NodeKind::Dir { .. } => h.u64(1),
                NodeKind::File { size, link, .. } => {
                    h.u64(2);
                    h.u64(*size);
                    h.u64(link.map_or(0, |l| l.wrapping_add(1)));
                }
                NodeKind::Symlink { target } => {
                    h.u64(3);
                    h.bytes(target);
                }
                NodeKind::CharDev { major, minor } => {
                    h.u64(4);
                    h.u64(u64::from(*major) << 32 | u64::from(*minor));
                }
                NodeKind::BlockDev { major, minor } => {
                    h.u64(5);
                    h.u64(u64::from(*major) << 32 | u64::from(*minor));
                }
                NodeKind::Fifo => h.u64(6),
                #[allow(unreachable_patterns)]
                _ => h.u64(7),
            }
        }
    }
    for &r in raw_sizes {
        h.u64(r);
    }
    h.finish()
}

/// Sets `spec.image.seed` for its [`SeedChoice`]: the number given, `random()` for
/// `"random"`, [`derived_seed`] otherwise. Returns the seed.
pub fn resolve_seed(
    spec: &mut Spec,
    trees: &[Option<Tree>],
    raw_sizes: &[u64],
    clamp: Option<i64>,
    random: impl FnOnce() -> u64,
) -> u64 {
    let seed = match spec.image.seed_choice {
        SeedChoice::Fixed(n) => n,
        SeedChoice::Random => random(),
        SeedChoice::Derived => derived_seed(spec, trees, raw_sizes, clamp),
    };
    spec.image.seed = seed;
    seed
}

//! The lz4 frame structure, followed over the bytes the decoder reads.
//!
//! lz4_flex's frame decoder takes an end of input where a block header should be as the end of
//! the frame, so a `.lz4` cut exactly after a block decodes "cleanly" to a shorter image. The
//! walk below follows frames, blocks, end marks and checksums (skipping the data, so it costs a
//! few steps per block) and says whether the input stopped where the format lets it stop:
//! after a whole frame, or between the blocks of a legacy frame (which has no end mark).

/// Magic number of an lz4 frame.
const MAGIC: u32 = 0x184D_2204;
/// Magic number of the legacy format (`lz4 -l`).
const LEGACY: u32 = 0x184C_2102;

/// What the next bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// A frame's magic number (or the end of the input).
    Magic,
    /// FLG and BD of a frame descriptor.
    Descriptor,
    /// A block header of a frame whose FLG byte is held.
    Block(u8),
    /// A block header of the legacy format (or the end of the input).
    LegacyBlock,
    /// The length of a skippable frame.
    SkippableLength,
    /// Bytes the walk does not recognise: the decoder reports them.
    Lost,
}

/// The walk's state: a small header being gathered, or data being skipped.
#[derive(Debug)]
pub(crate) struct Lz4Walk {
    phase: Phase,
    /// Header bytes gathered so far (at most four).
    head: [u8; 4],
    got: usize,
    /// Bytes of block data, checksums or descriptor fields still to pass over.
    skip: u64,
}

impl Default for Lz4Walk {
    fn default() -> Self {
        Lz4Walk {
            phase: Phase::Magic,
            head: [0; 4],
            got: 0,
            skip: 0,
        }
    }
}

/// FLG bits.
const BLOCK_CHECKSUM: u8 = 0x10;
const CONTENT_SIZE: u8 = 0x08;
const CONTENT_CHECKSUM: u8 = 0x04;
const DICT_ID: u8 = 0x01;

impl Lz4Walk {
    /// Whether the input may end here.
    pub(crate) fn complete(&self) -> bool {
        self.skip == 0 && self.got == 0 && matches!(self.phase, Phase::Magic | Phase::LegacyBlock)
    }

    /// How many header bytes the current phase gathers.
    fn want(&self) -> usize {
        match self.phase {
            Phase::Descriptor => 2,
            _ => 4,
        }
    }

    /// Follows `bytes`, the next bytes of the input.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.phase != Phase::Lost {
            if self.skip > 0 {
                let n = usize::try_from(self.skip).map_or(bytes.len(), |s| s.min(bytes.len()));
                bytes = bytes.get(n..).unwrap_or_default();
                self.skip = self
                    .skip
                    .saturating_sub(u64::try_from(n).unwrap_or(u64::MAX));
                continue;
            }
            let want = self.want();
            let n = want.saturating_sub(self.got).min(bytes.len());
            let (take, rest) = bytes.split_at(n);
            if let Some(dst) = self.head.get_mut(self.got..self.got.saturating_add(n)) {
                dst.copy_from_slice(take);
            }
            self.got = self.got.saturating_add(n);
            bytes = rest;
            if self.got == want {
                self.got = 0;
                self.step();
            }
        }
    }

    /// Moves on after a whole header.
    fn step(&mut self) {
        let word = u32::from_le_bytes(self.head);
        let [flg, ..] = self.head;
        (self.phase, self.skip) = match self.phase {
            Phase::Magic if word == MAGIC => (Phase::Descriptor, 0),
            Phase::Magic if word == LEGACY => (Phase::LegacyBlock, 0),
            Phase::Magic if word & 0xFFFF_FFF0 == 0x184D_2A50 => (Phase::SkippableLength, 0),
            Phase::Magic | Phase::Lost => (Phase::Lost, 0),
            Phase::SkippableLength => (Phase::Magic, u64::from(word)),
            Phase::Descriptor => {
                // Content size (8), dictionary id (4), then the header checksum (1).
                let mut rest = 1u64;
                if flg & CONTENT_SIZE != 0 {
                    rest = rest.saturating_add(8);
                }
                if flg & DICT_ID != 0 {
                    rest = rest.saturating_add(4);
                }
                (Phase::Block(flg), rest)
            }
            Phase::Block(flg) if word == 0 => {
                // The end mark, then the content checksum when the frame has one.
                let sum = if flg & CONTENT_CHECKSUM != 0 { 4 } else { 0 };
                (Phase::Magic, sum)
            }
            Phase::Block(flg) => {
                let sum = if flg & BLOCK_CHECKSUM != 0 { 4 } else { 0 };
                (
                    Phase::Block(flg),
                    u64::from(word & 0x7FFF_FFFF).saturating_add(sum),
                )
            }
            Phase::LegacyBlock => (Phase::LegacyBlock, u64::from(word)),
        };
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::panic,
    reason = "tests"
)]
mod tests {
    use super::*;

    fn walk(bytes: &[u8], step: usize) -> Lz4Walk {
        let mut w = Lz4Walk::default();
        for c in bytes.chunks(step.max(1)) {
            w.feed(c);
        }
        w
    }

    /// Whole frames end complete whatever the chunking; every cut inside one does not.
    #[test]
    fn cuts_inside_a_frame_are_incomplete() {
        use std::io::Write as _;
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 7) as u8).collect();
        for checksums in [false, true] {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_checksums(checksums)
                .content_checksum(checksums);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            enc.write_all(&data).unwrap();
            let frame = enc.finish().unwrap();
            let mut two = frame.clone();
            two.extend_from_slice(&frame);
            for step in [1, 3, 4096, usize::MAX] {
                assert!(walk(&frame, step).complete());
                assert!(walk(&two, step).complete());
            }
            for cut in (1..frame.len())
                .step_by(97)
                .chain([frame.len() - 4, frame.len() - 1])
            {
                assert!(!walk(&frame[..cut], 4096).complete(), "cut at {cut}");
                assert!(
                    !walk(&two[..frame.len() + cut], 4096).complete(),
                    "cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn skippable_and_legacy() {
        let mut skip = 0x184D_2A53u32.to_le_bytes().to_vec();
        skip.extend_from_slice(&3u32.to_le_bytes());
        skip.extend_from_slice(b"abc");
        assert!(walk(&skip, 1).complete());
        assert!(!walk(&skip[..skip.len() - 1], 1).complete());
        let mut legacy = LEGACY.to_le_bytes().to_vec();
        legacy.extend_from_slice(&2u32.to_le_bytes());
        legacy.extend_from_slice(&[0x10, 0x61]);
        assert!(walk(&legacy, 1).complete());
        assert!(!walk(&legacy[..legacy.len() - 1], 1).complete());
        assert!(!walk(b"garbage!", 1).complete());
    }
}

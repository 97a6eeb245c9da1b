//! Deterministic pseudo-random bytes for test data, and a reference CRC-32.

/// xorshift64 with the shifts (13, 7, 17): a deterministic stream of `u64`s from a non-zero
/// state. [`bytes`] is built on it; tests that need the raw stream (hostile inputs) use it as is.
#[derive(Debug, Clone)]
pub struct XorShift64(u64);

impl XorShift64 {
    /// A generator whose first step starts from `state` (which must not be 0: zero stays zero).
    pub fn new(state: u64) -> Self {
        XorShift64(state)
    }

    /// The next state.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// `len` deterministic, incompressible bytes for `seed`: xorshift64 from
/// `seed * 0x9E37_79B9_7F4A_7C15 | 1`, one byte per step taken from bits 24..32.
///
/// The copies this replaces differed in the byte they took: the FAT crate's tests, the
/// benches and the CLI tests' "used card" used bits 24..32, the ext4 crate's tests bits 0..8.
/// Only the first kept: no ext4 test depends on which bytes a file holds (they compare what
/// is read back with what was written), so both kinds of test assert what they did.
pub fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = XorShift64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..len).map(|_| (x.next_u64() >> 24) as u8).collect()
}

/// `len` deterministic bytes for `seed` from xorshift64* (shifts 12, 25, 27, multiplier
/// `0x2545_F491_4F6C_DD1D`, top byte): the file contents of the pinned images. The pinned
/// sha256s depend on every byte, so this must never change.
pub fn xorshift64star_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// CRC-32 (IEEE 802.3, reflected, as in GPT and zip), bit by bit: a reference that shares no
/// code with the crates under test.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn streams_are_fixed() {
        // The first bytes, pinned: test data must not drift.
        assert_eq!(bytes(1, 4), [11, 2, 229, 54]);
        assert_eq!(xorshift64star_bytes(5, 4), [234, 212, 92, 166]);
        let mut x = XorShift64::new(0x1234_5678_9abc_def0);
        let low: Vec<u64> = (0..4).map(|_| x.next_u64() & 0xff).collect();
        assert_eq!(low, [77, 59, 195, 36]);
    }
}

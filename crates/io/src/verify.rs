//! Verifiable blocks: every block `--verify` writes starts with a header
//! (magic, its own offset, a sequence number, a crc32c of the whole block
//! computed with the crc field zeroed); reads check blocks that carry the
//! magic. A block never written by a verifying run has no magic and is not
//! judged.

const MAGIC: u64 = u64::from_le_bytes(*b"SBVERIFY");
const CRC_AT: usize = 24;
/// Bytes of header at the start of each block.
pub const HEADER: usize = 32;

/// Writes the header into a block about to be written at `offset`.
pub fn stamp(buf: &mut [u8], offset: u64, seq: u64) {
    buf[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    buf[8..16].copy_from_slice(&offset.to_le_bytes());
    buf[16..24].copy_from_slice(&seq.to_le_bytes());
    buf[CRC_AT..CRC_AT + 8].fill(0);
    let crc = crc32c::crc32c(buf);
    buf[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The verdict on a block read at an offset.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// A verified block, intact.
    Good,
    /// Not written by a verifying run.
    Unknown,
    /// Corrupt, or written for another offset.
    Bad,
}

/// Checks a block read from `offset`.
pub fn check(buf: &[u8], offset: u64) -> Check {
    if buf.len() < HEADER || buf[0..8] != MAGIC.to_le_bytes() {
        return Check::Unknown;
    }
    let at = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
    let stored = u32::from_le_bytes(buf[CRC_AT..CRC_AT + 4].try_into().expect("4 bytes"));
    let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[..CRC_AT]), &[0u8; 8]);
    let crc = crc32c::crc32c_append(crc, &buf[CRC_AT + 8..]);
    let pad_clean = buf[CRC_AT + 4..CRC_AT + 8].iter().all(|&b| b == 0);
    if at != offset || crc != stored || !pad_clean {
        Check::Bad
    } else {
        Check::Good
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_block_checks_and_any_flipped_byte_fails() {
        let mut b = vec![7u8; 4096];
        stamp(&mut b, 8192, 3);
        assert_eq!(check(&b, 8192), Check::Good);
        assert_eq!(check(&b, 4096), Check::Bad, "a block at the wrong offset");
        for i in [9usize, 30, 100, 4095] {
            let mut c = b.clone();
            c[i] ^= 1;
            assert_eq!(check(&c, 8192), Check::Bad, "byte {i}");
        }
        assert_eq!(check(&[0u8; 4096], 0), Check::Unknown);
    }
}

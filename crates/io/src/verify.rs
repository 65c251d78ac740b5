//! Verifiable blocks: every block `--verify` writes starts with a header
//! (magic, its own offset, a stamp, a crc32c of the whole block computed
//! with the crc field zeroed); reads check blocks that carry the magic. A
//! block never written by a verifying run has no magic and is not judged.
//!
//! The stamp is the block's **generation**: the ledger's id in its upper 32
//! bits and, below, how many times this ledger has written the block. The
//! [`Ledger`] remembers the generation of every block it wrote, so a block
//! that reads back intact but older than the last write made to it (a lost
//! write, or a stale copy put back) fails, not only a corrupt one. For a
//! file the ledger is kept beside it (`PATH.sbverify`) and checks carry
//! across runs; for a block device it lasts one run (there is no safe place
//! beside a device, and a device name is reused by other devices).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::profile::Profile;
use crate::target::Target;

const MAGIC: u64 = u64::from_le_bytes(*b"SBVERIFY");
const CRC_AT: usize = 24;
/// Bytes of header at the start of each block.
pub const HEADER: usize = 32;
const LEDGER_MAGIC: &[u8; 8] = b"SBLEDGR1";
const LEDGER_HEAD: usize = 40;
/// Above this many blocks (1 GiB of ledger) generations are not tracked;
/// offset and crc are still checked.
const MAX_BLOCKS: u64 = 1 << 28;

/// Writes the header into a block about to be written at `offset`.
pub fn stamp(buf: &mut [u8], offset: u64, stamp: u64) {
    buf[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    buf[8..16].copy_from_slice(&offset.to_le_bytes());
    buf[16..24].copy_from_slice(&stamp.to_le_bytes());
    buf[CRC_AT..CRC_AT + 8].fill(0);
    let crc = crc32c::crc32c(buf);
    buf[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The verdict on a block read at an offset.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// A verified block, intact (and of the expected generation when known).
    Good,
    /// Not written by a verifying run.
    Unknown,
    /// Corrupt, written for another offset, or not the last write made.
    Bad,
}

/// A header that is intact and was written for `offset`: its stamp.
fn intact(buf: &[u8], offset: u64) -> Result<Option<u64>, ()> {
    if buf.len() < HEADER || buf[0..8] != MAGIC.to_le_bytes() {
        return Ok(None);
    }
    let at = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
    let stamp = u64::from_le_bytes(buf[16..24].try_into().expect("8 bytes"));
    let stored = u32::from_le_bytes(buf[CRC_AT..CRC_AT + 4].try_into().expect("4 bytes"));
    let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[..CRC_AT]), &[0u8; 8]);
    let crc = crc32c::crc32c_append(crc, &buf[CRC_AT + 8..]);
    let pad_clean = buf[CRC_AT + 4..CRC_AT + 8].iter().all(|&b| b == 0);
    if at != offset || crc != stored || !pad_clean {
        Err(())
    } else {
        Ok(Some(stamp))
    }
}

/// Checks a block read from `offset` for integrity only (offset and crc).
pub fn check(buf: &[u8], offset: u64) -> Check {
    match intact(buf, offset) {
        Ok(None) => Check::Unknown,
        Ok(Some(_)) => Check::Good,
        Err(()) => Check::Bad,
    }
}

/// The generation of every block written through it. A block is written
/// by one thread only (verifying threads write disjoint blocks), so each
/// entry has one writer.
pub struct Ledger {
    path: Option<PathBuf>,
    id: u32,
    bs: u64,
    align: u64,
    gens: Vec<AtomicU32>,
    /// Loaded from a run that did not end cleanly: its last writes may be
    /// newer than the ledger, so a newer generation is accepted.
    lenient: bool,
    wrote: AtomicBool,
}

impl Ledger {
    /// The ledger for `p` on `target`: the one kept beside a file if it was
    /// made for the same block size and alignment, else a new one. When the
    /// profile writes, the kept copy is marked unclean until [`Ledger::save`].
    pub fn open(target: &Target, p: &Profile) -> Result<Ledger, String> {
        let (bs, align) = (p.bs, p.alignment());
        let blocks = target.size / align;
        let path = (!target.is_block).then(|| {
            let mut s = target.path.clone().into_os_string();
            s.push(".sbverify");
            PathBuf::from(s)
        });
        let mut l = Ledger {
            path,
            id: new_id(),
            bs,
            align,
            gens: Vec::new(),
            lenient: false,
            wrote: AtomicBool::new(false),
        };
        if blocks > MAX_BLOCKS {
            l.path = None;
            return Ok(l);
        }
        l.gens = (0..blocks).map(|_| AtomicU32::new(0)).collect();
        if let Some(bytes) = l.path.as_ref().and_then(|p| std::fs::read(p).ok()) {
            l.load(&bytes, blocks);
        }
        if p.writes() {
            l.write_file(true)?;
        }
        Ok(l)
    }

    fn load(&mut self, b: &[u8], blocks: u64) {
        if b.len() != LEDGER_HEAD + blocks as usize * 4 || &b[0..8] != LEDGER_MAGIC {
            return;
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        if u64_at(16) != self.bs || u64_at(24) != self.align || u64_at(32) != blocks {
            return;
        }
        self.id = u32_at(8);
        self.lenient = u32_at(12) != 0;
        for (g, c) in self.gens.iter().zip(b[LEDGER_HEAD..].chunks_exact(4)) {
            g.store(u32::from_le_bytes(c.try_into().expect("4 bytes")), Ordering::Relaxed);
        }
    }

    fn write_file(&self, unclean: bool) -> Result<(), String> {
        let Some(path) = &self.path else { return Ok(()) };
        let mut b = Vec::with_capacity(LEDGER_HEAD + self.gens.len() * 4);
        b.extend_from_slice(LEDGER_MAGIC);
        b.extend_from_slice(&self.id.to_le_bytes());
        b.extend_from_slice(&u32::from(unclean || self.lenient).to_le_bytes());
        b.extend_from_slice(&self.bs.to_le_bytes());
        b.extend_from_slice(&self.align.to_le_bytes());
        b.extend_from_slice(&(self.gens.len() as u64).to_le_bytes());
        for g in &self.gens {
            b.extend_from_slice(&g.load(Ordering::Relaxed).to_le_bytes());
        }
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        std::fs::write(&tmp, &b)
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| format!("writing the verification ledger {}: {e}", path.display()))
    }

    /// Keeps the generations written (marks the kept copy clean).
    pub fn save(&self) -> Result<(), String> {
        if self.wrote.load(Ordering::Relaxed) || self.lenient {
            self.write_file(false)?;
        }
        Ok(())
    }

    fn slot(&self, offset: u64) -> Option<&AtomicU32> {
        self.gens.get((offset / self.align) as usize)
    }

    /// The stamp for the next write of the block at `offset`, recorded as
    /// the generation that block must now read back with. Called by the
    /// block's one writer, before the write is submitted.
    pub fn next_stamp(&self, offset: u64) -> u64 {
        self.wrote.store(true, Ordering::Relaxed);
        let gen = match self.slot(offset) {
            Some(g) => {
                let n = g.load(Ordering::Relaxed).wrapping_add(1).max(1);
                g.store(n, Ordering::Relaxed);
                n
            }
            None => 0,
        };
        (u64::from(self.id) << 32) | u64::from(gen)
    }

    /// Checks a block read from `offset`: intact, written for this offset,
    /// and of the generation last written to it.
    pub fn check(&self, buf: &[u8], offset: u64) -> Check {
        let want = self.slot(offset).map_or(0, |g| g.load(Ordering::Relaxed));
        match intact(buf, offset) {
            Err(()) => Check::Bad,
            // Written through this ledger and now without a header: lost.
            Ok(None) if want > 0 => Check::Bad,
            Ok(None) => Check::Unknown,
            Ok(Some(_)) if want == 0 => Check::Good,
            Ok(Some(s)) => {
                let (id, gen) = ((s >> 32) as u32, s as u32);
                if id == self.id && (gen == want || (self.lenient && gen > want)) {
                    Check::Good
                } else {
                    Check::Bad
                }
            }
        }
    }
}

/// A ledger id unlikely to repeat: time and process id mixed.
fn new_id() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let x = (t.as_nanos() as u64) ^ (u64::from(std::process::id()) << 40);
    let x = (x ^ (x >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    ((x ^ (x >> 33)) as u32).max(1)
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

    fn target(d: &std::path::Path) -> Target {
        Target { path: d.join("t.dat"), size: 64 * 4096, is_block: false, logical_block: 512 }
    }

    #[test]
    fn an_older_generation_of_a_block_fails_and_survives_a_reopen() {
        let d = tempfile::tempdir().unwrap();
        let mut p = Profile::new("w");
        p.bs = 4096;
        p.read_pct = 0;
        let l = Ledger::open(&target(d.path()), &p).unwrap();
        let (mut first, mut second) = (vec![1u8; 4096], vec![2u8; 4096]);
        stamp(&mut first, 4096, l.next_stamp(4096));
        stamp(&mut second, 4096, l.next_stamp(4096));
        assert_eq!(l.check(&second, 4096), Check::Good);
        assert_eq!(l.check(&first, 4096), Check::Bad, "a stale copy of the block");
        assert_eq!(l.check(&[0u8; 4096], 4096), Check::Bad, "a lost write");
        assert_eq!(l.check(&[0u8; 4096], 8192), Check::Unknown, "never written");
        l.save().unwrap();
        // A later run (reading) finds the same generations.
        p.read_pct = 100;
        let again = Ledger::open(&target(d.path()), &p).unwrap();
        assert_eq!(again.check(&second, 4096), Check::Good);
        assert_eq!(again.check(&first, 4096), Check::Bad);
        // Another block size starts a new ledger: nothing is known.
        p.bs = 8192;
        let other = Ledger::open(&target(d.path()), &p).unwrap();
        assert_eq!(other.check(&[0u8; 8192], 4096), Check::Unknown);
    }

    #[test]
    fn a_run_that_did_not_save_leaves_the_ledger_lenient_to_newer_blocks() {
        let d = tempfile::tempdir().unwrap();
        let mut p = Profile::new("w");
        p.bs = 4096;
        p.read_pct = 0;
        let l = Ledger::open(&target(d.path()), &p).unwrap();
        let mut a = vec![0u8; 4096];
        stamp(&mut a, 0, l.next_stamp(0));
        l.save().unwrap();
        // A second writer is killed before it saves: its block is newer.
        let killed = Ledger::open(&target(d.path()), &p).unwrap();
        let mut b = vec![0u8; 4096];
        stamp(&mut b, 0, killed.next_stamp(0));
        drop(killed);
        p.read_pct = 100;
        let r = Ledger::open(&target(d.path()), &p).unwrap();
        assert_eq!(r.check(&b, 0), Check::Good, "newer than the ledger after an unclean end");
    }
}

//! The write journal of a recording medium (`media create --record`): the
//! daemon appends every write as the device receives it (offset, length,
//! data, in the order the model applied it), every discard, and every
//! flush with the time its data was on the image, all on CLOCK_MONOTONIC
//! so they compare with the clients' acknowledgement times on the same
//! host ([`monotonic_ns`]). Recording starts with the medium (its image is
//! a sparse file of zeros then), so the journal alone rebuilds the image
//! at any point of its life ([`crate::crash`]); nothing here reads the
//! image.
//!
//! The format, little-endian: the magic [`MAGIC`], the medium's size
//! (u64), then entries `kind u8, time_ns u64, offset u64, len u64` with
//! `len` bytes of data after a write. Each entry is one `write(2)` on an
//! `O_APPEND` file, so a reader sees whole entries up to the last one
//! written (a torn tail, from a daemon killed mid-entry, is ignored).

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::Path;
use std::sync::Mutex;

/// The file's first bytes (format version 1).
pub const MAGIC: &[u8; 8] = b"SBJOURN1";

const HEADER: u64 = 16;
const ENTRY: usize = 25;

/// What one journal entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Data written at `offset` (the device received it).
    Write,
    /// A flush: everything received before it is on the image.
    Flush,
    /// A discard (punched hole): the range reads as zeros.
    Zero,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Write => b'W',
            Kind::Flush => b'F',
            Kind::Zero => b'Z',
        }
    }

    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            b'W' => Some(Kind::Write),
            b'F' => Some(Kind::Flush),
            b'Z' => Some(Kind::Zero),
            _ => None,
        }
    }
}

/// CLOCK_MONOTONIC now, in ns: the clock of the journal and of the
/// clients' acknowledgement log.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The daemon's side: appends entries.
pub struct Recorder {
    file: Mutex<File>,
}

impl Recorder {
    /// Creates (truncates) the journal at `path` for a medium of `size` bytes.
    pub fn create(path: &Path, size: u64) -> std::io::Result<Recorder> {
        let mut file = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(path)?;
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&size.to_le_bytes());
        file.write_all(&head)?;
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Recorder { file: Mutex::new(file) })
    }

    fn append(&self, kind: Kind, offset: u64, len: u64, data: &[u8]) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(ENTRY + data.len());
        buf.push(kind.byte());
        // The time under the lock, so times rise with the file's order.
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        buf.extend_from_slice(&monotonic_ns().to_le_bytes());
        buf.extend_from_slice(&offset.to_le_bytes());
        buf.extend_from_slice(&len.to_le_bytes());
        buf.extend_from_slice(data);
        f.write_all(&buf)
    }

    /// A write of `data` at `offset`, as the device received it.
    pub fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.append(Kind::Write, offset, data.len() as u64, data)
    }

    /// A flush whose data is now on the image (or, for a model that lies
    /// about flushes, that it acknowledged).
    pub fn flush(&self) -> std::io::Result<()> {
        self.append(Kind::Flush, 0, 0, &[])
    }

    /// A discard of `len` bytes at `offset`.
    pub fn zero(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.append(Kind::Zero, offset, len, &[])
    }
}

/// One entry as read back; a write's data stays in the file at `data_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What it is.
    pub kind: Kind,
    /// When (CLOCK_MONOTONIC, ns).
    pub t_ns: u64,
    /// Where on the medium.
    pub offset: u64,
    /// How many bytes.
    pub len: u64,
    /// Where a write's data starts in the journal file.
    pub data_at: u64,
}

/// A journal read back: its entries (without the data) and its file.
pub struct Journal {
    /// The medium's size.
    pub size: u64,
    /// Every whole entry, in the order recorded.
    pub entries: Vec<Entry>,
    file: File,
}

impl Journal {
    /// Reads the index of the journal at `path`.
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        let file = File::open(path)?;
        let total = file.metadata()?.len();
        let mut r = BufReader::with_capacity(1 << 16, file.try_clone()?);
        let mut head = [0u8; HEADER as usize];
        r.read_exact(&mut head)?;
        if &head[..8] != MAGIC {
            return Err(std::io::Error::other(format!("{}: not a storbench write journal", path.display())));
        }
        let size = u64::from_le_bytes(head[8..16].try_into().expect("8 bytes"));
        let (mut entries, mut pos) = (Vec::new(), HEADER);
        let mut e = [0u8; ENTRY];
        while pos + ENTRY as u64 <= total {
            r.read_exact(&mut e)?;
            let word = |i: usize| u64::from_le_bytes(e[i..i + 8].try_into().expect("8 bytes"));
            let Some(kind) = Kind::from_byte(e[0]) else {
                return Err(std::io::Error::other(format!("{}: bad entry at byte {pos}", path.display())));
            };
            let (t_ns, offset, len) = (word(1), word(9), word(17));
            let data_at = pos + ENTRY as u64;
            let next = data_at + if kind == Kind::Write { len } else { 0 };
            if next > total {
                break;
            }
            if kind == Kind::Write {
                r.seek_relative(len as i64)?;
            }
            entries.push(Entry { kind, t_ns, offset, len, data_at });
            pos = next;
        }
        Ok(Journal { size, entries, file })
    }

    /// The same journal read by another file handle (its index copied, not
    /// read again): for a second reader on another thread.
    pub fn try_clone(&self) -> std::io::Result<Journal> {
        Ok(Journal { size: self.size, entries: self.entries.clone(), file: self.file.try_clone()? })
    }

    /// The medium's size from the journal's header alone (its entries are not read).
    pub fn medium_size(path: &Path) -> std::io::Result<u64> {
        let mut head = [0u8; HEADER as usize];
        File::open(path)?.read_exact(&mut head)?;
        if &head[..8] != MAGIC {
            return Err(std::io::Error::other(format!("{}: not a storbench write journal", path.display())));
        }
        Ok(u64::from_le_bytes(head[8..16].try_into().expect("8 bytes")))
    }

    /// A write's data.
    pub fn data(&self, e: &Entry) -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; e.len as usize];
        self.file.read_exact_at(&mut buf, e.data_at)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back_in_order_with_their_data() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j");
        let r = Recorder::create(&p, 1 << 20).unwrap();
        r.write(4096, b"hello").unwrap();
        r.flush().unwrap();
        r.zero(8192, 4096).unwrap();
        let j = Journal::open(&p).unwrap();
        assert_eq!(j.size, 1 << 20);
        assert_eq!(Journal::medium_size(&p).unwrap(), 1 << 20);
        let c = j.try_clone().unwrap();
        assert_eq!((c.size, c.entries.len(), c.data(&c.entries[0]).unwrap()), (j.size, 3, b"hello".to_vec()));
        let kinds: Vec<Kind> = j.entries.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![Kind::Write, Kind::Flush, Kind::Zero]);
        assert_eq!(j.data(&j.entries[0]).unwrap(), b"hello");
        assert!(j.entries[0].t_ns <= j.entries[1].t_ns && j.entries[1].t_ns <= j.entries[2].t_ns);
        assert_eq!((j.entries[2].offset, j.entries[2].len), (8192, 4096));
    }

    #[test]
    fn a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j");
        let r = Recorder::create(&p, 1 << 20).unwrap();
        r.write(0, &[7u8; 100]).unwrap();
        r.write(512, &[8u8; 100]).unwrap();
        let len = std::fs::metadata(&p).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(len - 10).unwrap();
        assert_eq!(Journal::open(&p).unwrap().entries.len(), 1);
    }
}

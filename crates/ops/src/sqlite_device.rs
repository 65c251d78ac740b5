//! The device models under SQLite's files (`sqlite:PATH?model=SPEC`,
//! `storbench_db::FileDevice`): a model of `storbench_emu` driven in
//! process under a page cache (`storbench_emu::inproc`). The binary
//! registers [`open`] at start-up, so any SQLite URL in any verb can name
//! a model.

use std::path::Path;
use std::sync::Arc;

use storbench_db::FileDevice;
use storbench_emu::inproc::{Metadata, PageCacheDevice, CAPACITY};
use storbench_emu::Spec;

/// A model behind SQLite's files.
#[derive(Debug)]
struct Device(PageCacheDevice);

impl FileDevice for Device {
    fn open(&self, path: &Path) -> u32 {
        self.0.open(path)
    }
    fn write(&self, file: u32, offset: u64, len: u64) {
        self.0.write(file, offset, len)
    }
    fn truncate(&self, file: u32, size: u64) {
        self.0.truncate(file, size)
    }
    fn sync(&self, file: u32) {
        self.0.sync(file)
    }
    fn delete(&self, path: &Path) {
        self.0.delete(path)
    }
    fn describe(&self) -> String {
        format!("{}; {}", self.0.label(), self.0.metadata())
    }
}

/// How the filesystem holding `dir` makes an inode's change durable:
/// ext4 says whether it has a journal (`/sys/fs/ext4/DEV/journal_task`
/// is `<none>` without one); every other filesystem, and ext4 we cannot
/// read, is taken to journal (ext4's and xfs's default).
pub fn metadata_of(dir: &Path) -> Metadata {
    let Some(m) = storbench_proc::mount_of(dir) else { return Metadata::Journal };
    if m.fs != "ext4" {
        return Metadata::Journal;
    }
    let dev = Path::new(&m.source).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match std::fs::read_to_string(format!("/sys/fs/ext4/{dev}/journal_task")) {
        Ok(t) if t.trim() == "<none>" => Metadata::InPlace,
        _ => Metadata::Journal,
    }
}

/// The device a URL's `model=SPEC` names (a built-in model's name or a
/// model file, as `media create --model` takes it), under the filesystem
/// of the database's directory `dir`: the model stands in for the device
/// below it, and that filesystem decides what an fsync sends it.
pub fn open(spec: &str, dir: &Path) -> Result<Arc<dyn FileDevice>, String> {
    let s = Spec::parse(spec, &[]).map_err(|e| e.to_string())?;
    let model = s.build(CAPACITY).map_err(|e| e.to_string())?;
    let label = format!("{spec} in process ({}; page cache above it)", s.label());
    Ok(Arc::new(Device(PageCacheDevice::new(model, label, metadata_of(dir)))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Unmounts (and so frees the loop device of) what a test mounted,
    /// even when the test fails.
    struct Mounted(std::path::PathBuf);

    impl Drop for Mounted {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }

    fn ext4(img: &Path, at: &Path, options: &str) -> Mounted {
        std::fs::File::create(img).unwrap().set_len(64 << 20).unwrap();
        let ok = Command::new("mkfs.ext4").args(["-q", "-F", "-O", options]).arg(img).status().unwrap();
        assert!(ok.success(), "mkfs.ext4 -O {options}");
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount").args(["-o", "loop"]).arg(img).arg(at).status().unwrap();
        assert!(ok.success(), "mount -o loop");
        Mounted(at.to_path_buf())
    }

    /// The filesystem decides: ext4 with and without a journal, made here,
    /// are told apart; tmpfs is taken to journal.
    #[test]
    fn the_filesystem_of_the_directory_decides_how_an_inode_change_is_written() {
        assert_eq!(metadata_of(Path::new("/dev/shm")), Metadata::Journal);
        let dir = tempfile::tempdir().unwrap();
        {
            let _m = ext4(&dir.path().join("nj.img"), &dir.path().join("nj"), "^has_journal");
            assert_eq!(metadata_of(&dir.path().join("nj")), Metadata::InPlace);
        }
        let _m = ext4(&dir.path().join("j.img"), &dir.path().join("j"), "has_journal");
        assert_eq!(metadata_of(&dir.path().join("j")), Metadata::Journal);
    }
}

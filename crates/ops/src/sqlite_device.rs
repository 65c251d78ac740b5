//! The device models under SQLite's files (`sqlite:PATH?model=SPEC`,
//! `storbench_db::FileDevice`): a model of `storbench_emu` driven in
//! process under a page cache (`storbench_emu::inproc`). The binary
//! registers [`open`] at start-up, so any SQLite URL in any verb can name
//! a model.

use std::path::Path;
use std::sync::Arc;

use storbench_db::FileDevice;
use storbench_emu::inproc::{PageCacheDevice, CAPACITY};
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
        self.0.label().to_string()
    }
}

/// The device a URL's `model=SPEC` names: a built-in model's name or a
/// model file, as `media create --model` takes it.
pub fn open(spec: &str) -> Result<Arc<dyn FileDevice>, String> {
    let s = Spec::parse(spec, &[]).map_err(|e| e.to_string())?;
    let model = s.build(CAPACITY).map_err(|e| e.to_string())?;
    let label = format!("{spec} in process ({}; page cache above it)", s.label());
    Ok(Arc::new(Device(PageCacheDevice::new(model, label))))
}

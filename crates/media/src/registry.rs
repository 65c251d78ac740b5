//! The registry of media: `media.json` in the state directory
//! (`storbench_proc`'s), written atomically under its lock.

use crate::{MediaError, Medium};

pub use storbench_proc::state_dir;

/// The media registry.
pub(crate) fn load() -> Result<Vec<Medium>, MediaError> {
    Ok(storbench_proc::load_json("media.json")?)
}

/// Saves the media registry.
pub(crate) fn save(all: &[Medium]) -> Result<(), MediaError> {
    Ok(storbench_proc::save_json("media.json", all)?)
}

/// Takes the state directory's lock (waits for another storbench).
pub(crate) fn lock() -> Result<storbench_proc::Lock, MediaError> {
    Ok(storbench_proc::lock()?)
}

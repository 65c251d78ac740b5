//! Fixed service times: the model the daemon is tested with (what the
//! daemon adds is then measurable against a known number), and the floor
//! (`--model constant` with zeros: everything measured is the daemon's).

use std::time::Duration;

use super::{cache_from, Builtin, Kind, ModelError, Op, Param, Params, Req, State, VolatileCache};

pub(crate) const CONSTANT: Builtin = Builtin {
    name: "constant",
    about: "fixed service time per op and N parallel units (for testing the daemon and measuring its floor)",
    params: &[
        Param { key: "read", default: "0", kind: Kind::Dur, doc: "every read" },
        Param { key: "write", default: "0", kind: Kind::Dur, doc: "every write" },
        Param { key: "flush", default: "0", kind: Kind::Dur, doc: "every flush" },
        Param { key: "discard", default: "0", kind: Kind::Dur, doc: "every discard" },
        Param { key: "units", default: "32", kind: Kind::Int, doc: "requests served at once" },
        Param { key: "write_cache", default: "false", kind: Kind::Bool, doc: "volatile write cache" },
        Param { key: "cache_size", default: "64M", kind: Kind::Size, doc: "its capacity" },
        Param {
            key: "lie_on_flush",
            default: "false",
            kind: Kind::Bool,
            doc: "acknowledge flushes without draining",
        },
    ],
};

/// Fixed service times.
#[derive(Clone, Debug)]
pub struct Constant {
    /// Per op, in [`Op::index`] order.
    pub times: [Duration; 4],
    /// Parallel units.
    pub units: usize,
    /// Volatile cache.
    pub cache: Option<VolatileCache>,
}

impl Constant {
    pub(crate) fn from_params(p: &Params) -> Result<Constant, ModelError> {
        let units = p.int("units");
        if !(1..=1024).contains(&units) {
            return Err(p.bad("units", "give 1 to 1024"));
        }
        Ok(Constant {
            times: [p.dur("read"), p.dur("write"), p.dur("flush"), p.dur("discard")],
            units: units as usize,
            cache: cache_from(p)?,
        })
    }

    pub(crate) fn service_time(&self, r: &Req, st: &mut State, _start_ns: u64) -> Duration {
        if let Some(c) = self.cache {
            match r.op {
                Op::Write => st.mark_dirty(r.offset, r.len),
                Op::Flush if !c.lie_on_flush => st.dirty.clear(),
                _ => {}
            }
        }
        self.times[r.op.index()]
    }
}

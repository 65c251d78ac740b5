//! Managed PostgreSQL: an instance whose data, WAL and temp files live where
//! a study wants them (media or directories), made with the machine's own
//! server binaries, listening on 127.0.0.1 and a private Unix socket, run as
//! the `postgres` OS user when storbench runs as root. `managed:NAME` is then
//! a database URL everywhere.
//!
//! Access: the socket lives in a directory only the server's user can
//! enter (0700), where `trust` admits it (and root); TCP asks for the
//! password of the role `root` (SCRAM), a random one made by `pg up` and
//! kept 0600 beside the socket, never printed: [`url`] reads it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::proxy::Link;
use crate::InstanceError;
use storbench_db::{Connection, DbUrl, Row, Stmt};
use storbench_proc::{
    as_user, chown, load_json, lock, private_file, reachable, save_json, state_dir, Identity, MemoryGroup,
    Sig, Step,
};

mod bins;
mod query;
mod registry;
mod server;
mod standby;
mod temporary;

pub use bins::*;
pub(crate) use query::*;
pub use registry::*;
pub use server::*;
pub use standby::*;
pub use temporary::*;

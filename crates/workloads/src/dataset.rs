//! The data side of the workload contract: build (with progress), inspect,
//! check and drop, with what a build records and how each is said, the
//! same for every workload, so a front end wires a new workload's verbs
//! once for all of them. Driving transactions is the other side
//! ([`crate::Workload`]); the figures both record are [`crate::figures`].
//! Nothing here prints or records: the front end does, from what these
//! return.

use std::sync::atomic::AtomicBool;

use serde_json::Value;
use storbench_db::{Connection, DbError};
use storbench_metrics::StepReport;

use crate::runner::Connector;

/// A build's progress, in the terms every workload shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Rows written so far.
    pub rows_done: u64,
    /// Rows expected.
    pub rows_total: u64,
    /// The table of the batch just written, or the phase; empty when the
    /// workload counts one table only (TPC-B's accounts).
    pub table: &'static str,
}

/// How a build's progress reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bar {
    /// Percent of the rows, with the table being loaded.
    Percent,
    /// Rows of one table (`accounts`) out of `total`, with a rate.
    Rows {
        /// What is counted.
        what: &'static str,
        /// Rows in all.
        total: u64,
    },
}

/// What a build did: the build step's figures (one
/// [`crate::figures::build_report`] for every workload) and the sentence
/// that says it.
#[derive(Clone, Debug)]
pub struct Built {
    /// The step's figures.
    pub report: StepReport,
    /// The result line.
    pub line: String,
}

/// Why a build gave no schema.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The stop flag was raised; what was loaded stays for `--replace` or
    /// the drop verb.
    #[error("interrupted")]
    Interrupted,
    /// The database refused.
    #[error(transparent)]
    Db(#[from] DbError),
}

/// One check's outcome.
pub trait Checked: serde::Serialize {
    /// It holds.
    fn passed(&self) -> bool;
}

/// A workload's data: build, inspect, check and drop, and the words and
/// records around them.
pub trait Dataset: Sync {
    /// How to build (scale, jobs), validated by the front end.
    type Options: Sync;
    /// What a built schema is (warehouses, a scale).
    type Info;
    /// How to check (TPC-H: which queries, and another database to compare with).
    type CheckOptions;
    /// One check's outcome.
    type Check: Checked;

    /// The workload's command (`tpcc`); its run kinds begin with it.
    fn name(&self) -> &'static str;
    /// Its name in a sentence (`TPC-C`).
    fn title(&self) -> &'static str;
    /// The schema as a sentence names it when it is missing. Default:
    /// `TPC-C schema`.
    fn schema_words(&self) -> String {
        format!("{} schema", self.title())
    }
    /// The build verb, which also labels the build step and ends the build
    /// run's kind (`build`; TPC-B's `init`, as pgbench's `-i`).
    fn build_verb(&self) -> &'static str {
        "build"
    }
    /// The schema in `conn`, or `None` when there is none.
    fn inspect(&self, conn: &mut dyn Connection) -> Result<Option<Self::Info>, DbError>;
    /// The schema `info` as a build that finds it says it (`a TPC-C schema
    /// of 4 warehouse(s)`).
    fn describe(&self, info: &Self::Info) -> String;
    /// Why a build (without `--replace`) refuses the schema `info` in
    /// `shown`, and what to do instead. Default: rebuild or drop it.
    fn refuse_existing(&self, shown: &str, info: &Self::Info) -> String {
        format!(
            "{shown} already holds {}: add --replace to rebuild it, or `storbench {} drop`",
            self.describe(info),
            self.name()
        )
    }
    /// A table of another workload the build would collide with (TPC-C
    /// and TPC-H both name a table CUSTOMER and ORDERS), and that
    /// workload's title. Default: none.
    fn foreign_table(
        &self,
        _conn: &mut dyn Connection,
    ) -> Result<Option<(&'static str, &'static str)>, DbError> {
        Ok(None)
    }
    /// The build run's label.
    fn build_label(&self, opts: &Self::Options) -> String;
    /// The build run's configuration, beside `db`.
    fn build_config(&self, opts: &Self::Options) -> Value;
    /// The build step's parameters.
    fn build_params(&self, opts: &Self::Options) -> Value;
    /// How the build's progress reads.
    fn bar(&self, _opts: &Self::Options) -> Bar {
        Bar::Percent
    }
    /// Creates the schema and loads it, stopping at the next batch once
    /// `stop` is raised where the workload can (TPC-H).
    fn build(
        &self,
        connect: Connector<'_>,
        opts: &Self::Options,
        stop: &AtomicBool,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<Built, BuildError>;
    /// Checks the schema `info` in `conn`.
    fn check(
        &self,
        conn: &mut dyn Connection,
        info: &Self::Info,
        opts: Self::CheckOptions,
    ) -> Result<Vec<Self::Check>, DbError>;
    /// Drops what the build made, leaving another workload's tables alone.
    fn drop(&self, conn: &mut dyn Connection) -> Result<(), DbError>;
}

/// Every workload's build kind: `tpcc-build`, `tpcb-init`.
pub fn build_kind<D: Dataset + ?Sized>(d: &D) -> String {
    format!("{}-{}", d.name(), d.build_verb())
}

/// Every workload's sentence for a schema that is not there: what is
/// missing in `shown` and the command that builds it.
pub fn missing<D: Dataset + ?Sized>(d: &D, shown: &str) -> String {
    format!(
        "no {} in {shown}: run `storbench {} {} --db {shown}` first",
        d.schema_words(),
        d.name(),
        d.build_verb()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_names_its_build_kind_and_the_missing_schema_alike() {
        assert_eq!(build_kind(&crate::tpcb::Data), "tpcb-init");
        assert_eq!(build_kind(&crate::tpcc::Data), "tpcc-build");
        assert_eq!(build_kind(&crate::tpch::Data), "tpch-build");
        assert_eq!(
            missing(&crate::tpcb::Data, "sqlite:b.db"),
            "no TPC-B tables (pgbench_branches) in sqlite:b.db: run `storbench tpcb init --db sqlite:b.db` first"
        );
        assert_eq!(
            missing(&crate::tpcc::Data, "x"),
            "no TPC-C schema in x: run `storbench tpcc build --db x` first"
        );
        let info = crate::tpcc::SchemaInfo { warehouses: 4, c_load: 1, has_procedures: false };
        assert_eq!(
            crate::tpcc::Data.refuse_existing("x", &info),
            "x already holds a TPC-C schema of 4 warehouse(s): add --replace to rebuild it, or `storbench tpcc drop`"
        );
        assert_eq!(
            crate::tpcb::Data.refuse_existing("x", &3),
            "x already holds pgbench tables at scale 3: add --replace to load them again"
        );
    }
}

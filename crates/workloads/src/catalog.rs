//! Every workload's [`Description`]s, one list: the kinds of run the
//! workloads record (their runs and builds), which `report` looks up by
//! kind. The workloads' own modules define theirs; nothing here drives a
//! workload.

use crate::figures::Description;

/// Every workload's descriptions. TPC-H's build has none: a report names
/// it by its kind (`tpch-build`) and shows its timings as any setup run's.
pub const DESCRIPTIONS: &[Description] =
    &[crate::tpcb::RUN, crate::tpcc::RUN, crate::tpch::RUN, crate::tpcb::INIT, crate::tpcc::BUILD];

/// The description of run kind `kind`, if a workload records it.
pub fn description(kind: &str) -> Option<&'static Description> {
    DESCRIPTIONS.iter().find(|d| d.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report finds each workload's runs and builds under the kinds
    /// they are recorded as, with the name the workload's verbs say.
    #[test]
    fn every_workload_describes_the_kinds_it_records() {
        use crate::dataset::{build_kind, Dataset};
        fn check<D: Dataset>(d: &D, has_build: bool) {
            let run = description(d.name()).expect("the workload's runs are described");
            assert_eq!((run.title, run.setup), (d.title(), false));
            assert!(!run.figures.is_empty());
            let build = description(&build_kind(d));
            assert_eq!(build.map(|b| b.setup), has_build.then_some(true), "{}", build_kind(d));
        }
        check(&crate::tpcb::Data, true);
        check(&crate::tpcc::Data, true);
        check(&crate::tpch::Data, false);
        let mut kinds: Vec<&str> = DESCRIPTIONS.iter().map(|d| d.kind).collect();
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds.len(), DESCRIPTIONS.len(), "a kind described twice");
    }
}

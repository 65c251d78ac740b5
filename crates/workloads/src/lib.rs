//! storbench-workloads: see DESIGN.md. (Being built.)

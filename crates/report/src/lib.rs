//! storbench-report: see DESIGN.md. (Being built.)

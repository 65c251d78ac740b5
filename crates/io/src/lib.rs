//! storbench-io: see DESIGN.md. (Being built.)

//! storbench-db: see DESIGN.md. (Being built.)

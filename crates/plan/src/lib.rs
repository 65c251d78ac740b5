//! storbench-plan: see DESIGN.md. (Being built.)

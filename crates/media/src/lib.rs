//! storbench-media: see DESIGN.md. (Being built.)

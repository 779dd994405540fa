//! A simulated set-top box.

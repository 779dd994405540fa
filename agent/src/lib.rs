//! The on-board recorder.
#![no_std]

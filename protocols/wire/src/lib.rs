//! The agent-collector wire format.
#![no_std]

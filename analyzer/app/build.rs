//! Links the `socscope` program as a position-dependent executable on Linux (see `main`).
fn main() {
    // A position-independent `socscope` (rustc's default on Linux) carries ~260 000 relative
    // relocations (vtables, string slices and panic locations of its whole dependency tree),
    // which the dynamic loader applies at every start: ~1 100 pages copied-on-write and 2-3 ms
    // of CPU before `main`, more than babeltrace2 takes to read a small trace whole. Linked at a
    // fixed address those addresses are resolved by the linker once. The cost is that the
    // program image is not randomised (the stack, heap, libraries and mmaps still are);
    // docs/ARCHITECTURE.md, "Start-up cost", weighs it. Only the final link changes: the
    // crates are still compiled as position-independent code, so nothing else is rebuilt.
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
